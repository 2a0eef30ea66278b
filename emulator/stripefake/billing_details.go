package stripefake

// billingDetailsJSON is Stripe's billing_details hash, of a PaymentMethod
// and of a charge. The emulator's test payment methods have none: every
// field is null, as on Stripe's own test payment methods.
type billingDetailsJSON struct {
	Address *addressJSON `json:"address"`
	Email   *string      `json:"email"`
	Name    *string      `json:"name"`
	Phone   *string      `json:"phone"`
}

// addressJSON is Stripe's address hash.
type addressJSON struct {
	City       *string `json:"city"`
	Country    *string `json:"country"`
	Line1      *string `json:"line1"`
	Line2      *string `json:"line2"`
	PostalCode *string `json:"postal_code"`
	State      *string `json:"state"`
}

// noBillingDetails is the billing_details of a test payment method: an
// address of nulls and null contact fields, as Stripe renders them.
func noBillingDetails() billingDetailsJSON {
	return billingDetailsJSON{Address: &addressJSON{}}
}
