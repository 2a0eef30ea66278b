package stripefake

import (
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Stripe's metadata limits.
const (
	maxMetadataKeys     = 50
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
)

// paymentIntentParamNames are the parameters Stripe's POST
// /v1/payment_intents knows at API version 2024-06-20; any other is
// refused (unknownParam).
var paymentIntentParamNames = []string{
	"amount", "application_fee_amount", "automatic_payment_methods", "capture_method", "confirm",
	"confirmation_method", "confirmation_token", "currency", "customer", "description",
	"error_on_requires_action", "expand", "mandate", "mandate_data", "metadata", "off_session",
	"on_behalf_of", "payment_method", "payment_method_configuration", "payment_method_data",
	"payment_method_options", "payment_method_types", "radar_options", "receipt_email", "return_url",
	"setup_future_usage", "shipping", "statement_descriptor", "statement_descriptor_suffix",
	"transfer_data", "transfer_group", "use_stripe_sdk",
}

// createParams are the parameters of POST /v1/payment_intents the emulator
// understands; the others Stripe knows are accepted and ignored.
type createParams struct {
	amount        int64
	currency      string
	paymentMethod string
	captureMethod string // automatic_async (when not given), automatic or manual
	confirm       bool
	description   string
	metadata      map[string]string
	expandCharge  bool // expand[]=latest_charge
}

// parseCreateParams validates the form of a create request. A non-nil error
// is a validation failure detected before execution (never saved for
// idempotency).
func parseCreateParams(form url.Values) (createParams, *errorObject) {
	var p createParams
	if perr := unknownParam(form, paymentIntentParamNames); perr != nil {
		return p, perr
	}

	rawAmount, ok := single(form, "amount")
	if !ok || rawAmount == "" {
		return p, missingParam("amount")
	}
	amount, err := strconv.ParseInt(rawAmount, 10, 64)
	if err != nil {
		return p, invalidParam("amount", "parameter_invalid_integer", "Invalid integer: "+rawAmount)
	}
	if amount < 1 {
		return p, invalidParam("amount", "amount_too_small", "This value must be greater than or equal to 1.")
	}
	if amount > 99999999 {
		return p, invalidParam("amount", "amount_too_large", "Amount must be no more than 99999999.")
	}
	p.amount = amount

	currency, ok := single(form, "currency")
	if !ok || currency == "" {
		return p, missingParam("currency")
	}
	var perr *errorObject
	if p.currency, perr = currencyParam("currency", currency); perr != nil {
		return p, perr
	}

	p.paymentMethod, _ = single(form, "payment_method")
	switch m, _ := single(form, "capture_method"); m {
	case "":
		p.captureMethod = captureAutomaticAsync
	case captureAutomatic, captureAutomaticAsync, captureManual:
		p.captureMethod = m
	default:
		return p, invalidParam("capture_method", "",
			"Invalid capture_method: must be one of automatic, automatic_async, or manual")
	}
	p.expandCharge = expands(form, "latest_charge")
	p.description, _ = single(form, "description")
	if p.confirm, ok = boolParam(form, "confirm"); !ok {
		return p, invalidParam("confirm", "parameter_invalid_boolean", "Invalid boolean: "+form.Get("confirm"))
	}
	if _, ok = boolParam(form, "error_on_requires_action"); !ok {
		return p, invalidParam("error_on_requires_action", "parameter_invalid_boolean",
			"Invalid boolean: "+form.Get("error_on_requires_action"))
	}
	if p.confirm && p.paymentMethod == "" {
		return p, missingParam("payment_method")
	}

	if p.metadata, perr = metadataParam(form); perr != nil {
		return p, perr
	}
	return p, nil
}

// single returns the last value of a parameter and whether it was present.
func single(form url.Values, key string) (string, bool) {
	vals, ok := form[key]
	if !ok || len(vals) == 0 {
		return "", false
	}
	return vals[len(vals)-1], true
}

// boolParam parses an optional boolean; ok is false for a malformed value.
func boolParam(form url.Values, key string) (val, ok bool) {
	raw, present := single(form, key)
	if !present || raw == "" {
		return false, true
	}
	switch raw {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// unknownParam is Stripe's refusal of the first parameter (in sorted
// order) whose name, up to its first '[', is not among known: a 400
// invalid_request_error with code parameter_unknown naming it. Nil if all
// are known.
func unknownParam(form url.Values, known []string) *errorObject {
	for _, key := range slices.Sorted(maps.Keys(form)) {
		name, _, _ := strings.Cut(key, "[")
		if !slices.Contains(known, name) {
			return unknownParamError(name)
		}
	}
	return nil
}

// unknownParamError is Stripe's answer to a parameter it does not know.
func unknownParamError(name string) *errorObject {
	return &errorObject{
		Type:    typeInvalidRequest,
		Code:    "parameter_unknown",
		Param:   name,
		DocURL:  "https://stripe.com/docs/error-codes/parameter-unknown",
		Message: "Received unknown parameter: " + name,
	}
}

// metadataParam collects metadata[KEY]=VALUE parameters. An empty value
// unsets a key, as in Stripe, so it is simply not stored.
func metadataParam(form url.Values) (map[string]string, *errorObject) {
	entries, _, perr := metadataEntries(form)
	if perr != nil {
		return nil, perr
	}
	md := make(map[string]string, len(entries))
	for k, v := range entries {
		if v != "" {
			md[k] = v
		}
	}
	return md, nil
}

// metadataEntries validates the metadata[KEY]=VALUE parameters and returns
// them all, empty values (which unset a key) included, and whether
// "metadata=" (empty) asked to unset every key.
func metadataEntries(form url.Values) (entries map[string]string, clear bool, perr *errorObject) {
	entries = make(map[string]string)
	for k := range form {
		if k == "metadata" {
			// "metadata=" (empty) clears metadata in Stripe. Any other
			// value is invalid.
			if v, _ := single(form, k); v != "" {
				return nil, false, invalidParam("metadata", "parameter_invalid_empty",
					"Invalid metadata: metadata must be a hash of keys and values.")
			}
			clear = true
			continue
		}
		name, ok := strings.CutPrefix(k, "metadata[")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, "]")
		if !ok || name == "" || strings.ContainsAny(name, "[]") {
			return nil, false, invalidParam(k, "", "Invalid metadata key: "+k+".")
		}
		if utf8.RuneCountInString(name) > maxMetadataKeyLen {
			return nil, false, invalidParam(k, "", "Metadata keys can have up to 40 characters.")
		}
		v, _ := single(form, k)
		if utf8.RuneCountInString(v) > maxMetadataValueLen {
			return nil, false, invalidParam(k, "", "Metadata values can have up to 500 characters.")
		}
		entries[name] = v
	}
	set := 0
	for _, v := range entries {
		if v != "" {
			set++
		}
	}
	if set > maxMetadataKeys {
		return nil, false, invalidParam("metadata", "", "Metadata can have up to 50 keys.")
	}
	return entries, clear, nil
}

// metadataUpdate is what an update's metadata parameters do to an
// object's metadata: clear it all ("metadata="), then set each key given,
// or unset it for an empty value.
type metadataUpdate struct {
	clear   bool
	entries map[string]string
}

// parseMetadataUpdate validates the metadata parameters of an update.
func parseMetadataUpdate(form url.Values) (metadataUpdate, *errorObject) {
	entries, clear, perr := metadataEntries(form)
	return metadataUpdate{clear: clear, entries: entries}, perr
}

// apply returns md updated; md is not modified.
func (u metadataUpdate) apply(md map[string]string) map[string]string {
	if !u.clear && len(u.entries) == 0 {
		return md
	}
	out := maps.Clone(md)
	if out == nil || u.clear {
		out = make(map[string]string, len(u.entries))
	}
	for k, v := range u.entries {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// Stripe's page size bounds for list and search.
const (
	defaultLimit = 10
	maxLimit     = 100
)

// limitParam parses the optional limit of a list or search request.
func limitParam(q url.Values) (int, *errorObject) {
	raw, ok := single(q, "limit")
	if !ok || raw == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(raw)
	switch {
	case err != nil:
		return 0, invalidParam("limit", "parameter_invalid_integer", "Invalid integer: "+raw)
	case n < 1:
		return 0, invalidParam("limit", "", "This value must be greater than or equal to 1.")
	case n > maxLimit:
		return 0, invalidParam("limit", "", "This value must be less than or equal to 100.")
	}
	return n, nil
}
