// Package wire is how compressed samples travel between ranks: the
// layout of an exchange message (Append, AppendParts, Read, whose bytes
// alias the message), the pool of receive buffers the loader reuses, and
// MeasureExchange, which times the path for datahelix bench exchange.
package wire
