package stripefake

import (
	"slices"
	"strings"
)

// supportedCurrencies are the currencies Stripe accepted in 2024, in the
// order its "Invalid currency" answer lists them (taken from such an answer
// of October 2024).
var supportedCurrencies = []string{
	"usd", "aed", "afn", "all", "amd", "ang", "aoa", "ars", "aud", "awg", "azn", "bam", "bbd", "bdt", "bgn",
	"bhd", "bif", "bmd", "bnd", "bob", "brl", "bsd", "bwp", "byn", "bzd", "cad", "cdf", "chf", "clp", "cny",
	"cop", "crc", "cve", "czk", "djf", "dkk", "dop", "dzd", "egp", "etb", "eur", "fjd", "fkp", "gbp", "gel",
	"gip", "gmd", "gnf", "gtq", "gyd", "hkd", "hnl", "hrk", "htg", "huf", "idr", "ils", "inr", "isk", "jmd",
	"jod", "jpy", "kes", "kgs", "khr", "kmf", "krw", "kwd", "kyd", "kzt", "lak", "lbp", "lkr", "lrd", "lsl",
	"mad", "mdl", "mga", "mkd", "mmk", "mnt", "mop", "mur", "mvr", "mwk", "mxn", "myr", "mzn", "nad", "ngn",
	"nio", "nok", "npr", "nzd", "omr", "pab", "pen", "pgk", "php", "pkr", "pln", "pyg", "qar", "ron", "rsd",
	"rub", "rwf", "sar", "sbd", "scr", "sek", "sgd", "shp", "sle", "sos", "srd", "std", "szl", "thb", "tjs",
	"tnd", "top", "try", "ttd", "twd", "tzs", "uah", "ugx", "uyu", "uzs", "vnd", "vuv", "wst", "xaf", "xcd",
	"xof", "xpf", "yer", "zar", "zmw", "usdc", "btn", "ghs", "eek", "lvl", "svc", "vef", "ltl", "sll", "mro",
}

// currencyParam validates a currency parameter's value: one Stripe supports,
// in any case (Stripe documents lowercase codes but accepts and lowercases
// any). It returns the lowercase code, or Stripe's refusal: a 400
// invalid_request_error naming the parameter, without a code, as Stripe
// answers (its error codes document none for this).
func currencyParam(param, value string) (string, *errorObject) {
	c := strings.ToLower(value)
	if slices.Contains(supportedCurrencies, c) {
		return c, nil
	}
	return "", invalidParam(param, "", "Invalid currency: "+c+". Stripe currently supports these currencies: "+
		strings.Join(supportedCurrencies, ", "))
}
