// Package payments is the payment flow run by the phase engine: create a
// payment, charge it through Stripe, finish with a stored response.
//
//	started ──► payment_created ──► charge_created ──► finished
//	         local tx            Stripe call, then    local tx: audit,
//	         payment + audit     tx: record the PI    stored response
//
// The engine fuses the reservation with the first step and the record of the
// Stripe call with the finish, so a fresh payment costs two commits.
package payments
