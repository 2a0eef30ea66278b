// Package logging is paymentsd's one log shape: zerolog's JSON lines on
// stderr (readable lines on a terminal), with
//
//   - "level" in lower case and "message" for the text, whoever logs: the
//     service itself through zerolog, River and any other library through
//     log/slog via SlogHandler;
//   - durations as Go duration strings with their unit, such as
//     "lock_timeout":"1m30s" or "duration":"1.234ms", never bare numbers.
//
// The level comes from PAYMENTSD_LOG_LEVEL (trace, debug, info, warn,
// error; info when unset); any other value is refused.
package logging
