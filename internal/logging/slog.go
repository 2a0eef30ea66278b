package logging

import (
	"context"
	"log/slog"

	"github.com/rs/zerolog"
)

// SlogHandler is a slog.Handler that writes each record through a zerolog
// logger, so a library that logs through log/slog (River does) writes the
// same JSON lines as paymentsd: "level":"warn", "message", the logger's own
// "time" stamp, and durations with their unit. A group becomes a nested
// object.
type SlogHandler struct {
	log      zerolog.Logger
	minLevel slog.Level
	// groups are the groups opened by WithGroup, outermost first; attrs[0]
	// are the attrs added by WithAttrs before the first of them, attrs[i]
	// those added inside groups[i-1].
	groups []string
	attrs  [][]slog.Attr
}

// NewSlogHandler returns a handler that writes records at minLevel and
// above through log (whose own level applies too).
func NewSlogHandler(log zerolog.Logger, minLevel slog.Level) *SlogHandler {
	return &SlogHandler{log: log, minLevel: minLevel, attrs: make([][]slog.Attr, 1)}
}

// Enabled reports whether records at level are written.
func (h *SlogHandler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.minLevel && zerologLevel(level) >= h.log.GetLevel()
}

// Handle writes r as one zerolog event.
func (h *SlogHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level < h.minLevel {
		return nil
	}
	ev := h.log.WithLevel(zerologLevel(r.Level))
	if ev == nil {
		return nil
	}
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	// Wrap the record's attrs in the open groups, innermost first.
	for i := len(h.groups) - 1; i >= 0; i-- {
		attrs = append(append([]slog.Attr(nil), h.attrs[i+1]...), attrs...)
		attrs = []slog.Attr{{Key: h.groups[i], Value: slog.GroupValue(attrs...)}}
	}
	addAttrs(ev, h.attrs[0])
	addAttrs(ev, attrs)
	// The record's time is not written: the service's logger stamps every
	// line with "time" itself, River's included.
	ev.Msg(r.Message)
	return nil
}

// WithAttrs returns a handler whose records carry attrs too.
func (h *SlogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := h.clone()
	last := len(c.attrs) - 1
	c.attrs[last] = append(c.attrs[last], attrs...)
	return c
}

// WithGroup returns a handler whose later attrs go into group name.
func (h *SlogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := h.clone()
	c.groups = append(c.groups, name)
	c.attrs = append(c.attrs, nil)
	return c
}

func (h *SlogHandler) clone() *SlogHandler {
	c := *h
	c.groups = append([]string(nil), h.groups...)
	c.attrs = make([][]slog.Attr, len(h.attrs))
	for i := range h.attrs {
		c.attrs[i] = append([]slog.Attr(nil), h.attrs[i]...)
	}
	return &c
}

// zerologLevel maps slog's levels (and those between them) to zerolog's.
func zerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l >= slog.LevelError:
		return zerolog.ErrorLevel
	case l >= slog.LevelWarn:
		return zerolog.WarnLevel
	case l >= slog.LevelInfo:
		return zerolog.InfoLevel
	case l >= slog.LevelDebug:
		return zerolog.DebugLevel
	}
	return zerolog.TraceLevel
}

func addAttrs(ev *zerolog.Event, attrs []slog.Attr) {
	for _, a := range attrs {
		addAttr(ev, a)
	}
}

// addAttr adds a to ev in zerolog's types: durations with their unit, times
// in zerolog's format, errors as strings, groups as nested objects. Empty
// attrs and empty groups are dropped, and an unnamed group's attrs are its
// parent's, as slog.Handler's rules say.
func addAttr(ev *zerolog.Event, a slog.Attr) {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		group := v.Group()
		switch {
		case len(group) == 0:
		case a.Key == "":
			addAttrs(ev, group)
		default:
			d := zerolog.Dict()
			addAttrs(d, group)
			ev.Dict(a.Key, d)
		}
		return
	}
	if a.Key == "" {
		return
	}
	switch v.Kind() {
	case slog.KindString:
		ev.Str(a.Key, v.String())
	case slog.KindInt64:
		ev.Int64(a.Key, v.Int64())
	case slog.KindUint64:
		ev.Uint64(a.Key, v.Uint64())
	case slog.KindFloat64:
		ev.Float64(a.Key, v.Float64())
	case slog.KindBool:
		ev.Bool(a.Key, v.Bool())
	case slog.KindDuration:
		ev.Dur(a.Key, v.Duration())
	case slog.KindTime:
		ev.Time(a.Key, v.Time())
	default:
		if err, ok := v.Any().(error); ok {
			ev.AnErr(a.Key, err)
			return
		}
		ev.Interface(a.Key, v.Any())
	}
}

var _ slog.Handler = (*SlogHandler)(nil)
