package stripefake

import (
	"strconv"
	"strings"
)

// zeroDecimal lists the currencies Stripe documents as zero-decimal: their
// amounts are whole units, not hundredths.
var zeroDecimal = map[string]bool{
	"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true, "krw": true, "mga": true,
	"pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true, "xof": true, "xpf": true,
}

// currencySymbols are the symbols Stripe's messages put before amounts.
var currencySymbols = map[string]string{
	"usd": "$", "eur": "€", "gbp": "£", "inr": "₹", "jpy": "¥",
}

// formatMoney renders an amount in the currency's smallest unit as Stripe's
// error messages do: "$12.34", "€0.50", "¥500"; currencies without a known
// symbol are written "12.34 CHF". amount must not be negative.
func formatMoney(amount int64, currency string) string {
	var num string
	if zeroDecimal[currency] {
		num = strconv.FormatInt(amount, 10)
	} else {
		cents := strconv.FormatInt(amount%100, 10)
		if len(cents) == 1 {
			cents = "0" + cents
		}
		num = strconv.FormatInt(amount/100, 10) + "." + cents
	}
	if sym, ok := currencySymbols[currency]; ok {
		return sym + num
	}
	return num + " " + strings.ToUpper(currency)
}
