package cli

import (
	"errors"
	"strconv"
)

// AutoBool is the value of a boolean flag with a third value, auto
// (--pin, --resume): a bare flag means true, and --flag=auto,
// --flag=true or --flag=false (or any form strconv.ParseBool reads) set it
// explicitly. A value must be joined with "=": in "--pin false" the
// "false" is an argument, which ParseFlagsHint refuses with a hint to
// write --pin=false. The zero value is false; a flag whose default is
// auto sets it before registering.
type AutoBool int

// The AutoBool values.
const (
	AutoFalse AutoBool = iota
	AutoTrue
	AutoAuto
)

// String returns the value as the flag accepts it.
func (a *AutoBool) String() string {
	if a != nil {
		switch *a {
		case AutoTrue:
			return "true"
		case AutoAuto:
			return "auto"
		}
	}
	return "false"
}

// Set parses a value of the flag.
func (a *AutoBool) Set(s string) error {
	if s == "auto" {
		*a = AutoAuto
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want auto, true or false")
	}
	*a = AutoFalse
	if b {
		*a = AutoTrue
	}
	return nil
}

// IsBoolFlag makes a bare flag mean true.
func (a *AutoBool) IsBoolFlag() bool { return true }
