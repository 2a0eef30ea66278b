package api_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	apispec "github.com/paymentsd/paymentsd/api"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// The document's pattern for a payment's description is written in the
// regex syntax ECMA-262 and Go share (\xHH), so JSON Schema tools read it;
// it must accept exactly the characters the server's validator accepts.
func TestDescriptionPatternAgreesWithTheValidator(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPI)
	require.NoError(t, err)
	pattern := doc.Components.Schemas["CreatePaymentRequest"].Value.Properties["description"].Value.Pattern
	require.NotContains(t, pattern, `\x{`, "Go-only regex syntax")
	re := regexp.MustCompile(pattern)

	runes := []rune{0x2028, 0x2029, 0xFEFF, 0xFFFD, 0x1F600, 0x10FFFF}
	for r := rune(0); r <= 0x2FF; r++ {
		runes = append(runes, r)
	}
	for _, r := range runes {
		description := "a" + string(r) + "b"
		value, err := json.Marshal(description)
		require.NoError(t, err)
		body := `{"amount": 100, "currency": "usd", "payment_method": "pm_card_visa", "description": ` + string(value) + `}`
		_, errs := payments.DecodeParams([]byte(body))
		require.Equal(t, errs == nil, re.MatchString(description), "U+%04X: the validator says %v", r, errs)
	}
}
