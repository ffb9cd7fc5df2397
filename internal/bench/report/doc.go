// Package report turns an evaluation into the report people look at:
// helix compared with each baseline and the oracle (NewReport), the
// issue's summary and goals (PASS or FALL SHORT with the figure), the
// report's sections (Section, measured by a SectionFunc) and the
// simulator's validation rule (ValidationSection), rendered as text,
// JSON, CSV and PNG plots (WriteText, WriteJSON, WriteCSV, WritePlots).
package report
