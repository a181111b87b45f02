package transport

import "encoding/json"

// StatsVar is a live view of a Transport's Stats with the method set of
// expvar.Var: publish it to have the counters in /debug/vars, read afresh
// on every request for the page:
//
//	expvar.Publish("ferry", tr.StatsVar())
//
// The transport package does not import expvar itself, on purpose:
// importing expvar registers the /debug/vars handler (command line, memory
// statistics) on http.DefaultServeMux, which a program that serves
// DefaultServeMux would expose without having asked for it. A program
// that publishes the Var has made that choice.
type StatsVar struct{ t *Transport }

// StatsVar returns t's Stats as an expvar.Var.
func (t *Transport) StatsVar() StatsVar { return StatsVar{t} }

// String returns the current Stats as a JSON object (field names as in
// Stats, nested the same way), as expvar.Var requires. A nil Transport
// gives "null".
func (v StatsVar) String() string {
	if v.t == nil {
		return "null"
	}
	b, err := json.Marshal(v.t.Stats())
	if err != nil { // Stats holds only numbers: this cannot happen
		return "null"
	}
	return string(b)
}
