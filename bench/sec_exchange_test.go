package bench

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// Lines that datahelix bench exchange and exchange_raw printed here.
const (
	goExchangeOut  = `{"bytes":254887,"samples":4,"messages":300,"exchange_us_per_message":253.36793666666668,"bare_us_per_message":50.50366,"exchange_mb_per_s":1005.9954836958389,"bare_mb_per_s":5046.90155129351,"exchange_over_bare":5.016823269178247}` + "\n"
	rawExchangeOut = `{"bytes":250000,"messages":300,"raw_us_per_message":19.710}` + "\n"
)

func TestParseExchange(t *testing.T) {
	g, err := ParseGoExchange([]byte("datahelix: generating the default dataset\n" + goExchangeOut))
	if err != nil || g.Bytes != 254887 || g.Samples != 4 || g.Messages != 300 || g.ExchangeUSPer != 253.36793666666668 || g.BareUSPer != 50.50366 {
		t.Errorf("ParseGoExchange = %+v, %v", g, err)
	}
	r, err := ParseRawExchange([]byte(rawExchangeOut))
	if err != nil || r != (RawExchange{Bytes: 250000, Messages: 300, RawUSPer: 19.71}) {
		t.Errorf("ParseRawExchange = %+v, %v", r, err)
	}
	for _, tt := range []struct {
		name, out, err string
		raw            bool
	}{
		{"no JSON", "rank 0 done\n", "printed no JSON line", false},
		{"bad JSON", "{\"bytes\":\n", "datahelix bench exchange printed", false},
		{"zero time", `{"bytes":10,"messages":3,"exchange_us_per_message":0,"bare_us_per_message":1}`, "implausible", false},
		{"no bytes", `{"messages":3,"exchange_us_per_message":1,"bare_us_per_message":1}`, "implausible", false},
		{"raw no JSON", "", "exchange_raw printed no JSON line", true},
		{"raw negative", `{"bytes":-1,"messages":3,"raw_us_per_message":1}`, "implausible", true},
		{"raw no messages", `{"bytes":1,"messages":0,"raw_us_per_message":1}`, "implausible", true},
	} {
		var err error
		if tt.raw {
			_, err = ParseRawExchange([]byte(tt.out))
		} else {
			_, err = ParseGoExchange([]byte(tt.out))
		}
		if err == nil || !errors.Is(err, ErrReal) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want an ErrReal error containing %q", tt.name, err, tt.err)
		}
	}
}

func FuzzParseExchange(f *testing.F) {
	f.Add([]byte(goExchangeOut))
	f.Add([]byte(rawExchangeOut))
	f.Add([]byte("x\n{\"bytes\":1e400}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if g, err := ParseGoExchange(data); err == nil {
			if g.Bytes <= 0 || !(g.ExchangeUSPer > 0) || !(g.BareUSPer > 0) || g.Messages < 1 {
				t.Fatalf("accepted %+v", g)
			}
		} else if !errors.Is(err, ErrReal) {
			t.Fatalf("error %v does not wrap ErrReal", err)
		}
		if r, err := ParseRawExchange(data); err == nil {
			if r.Bytes < 0 || !(r.RawUSPer > 0) || r.Messages < 1 {
				t.Fatalf("accepted %+v", r)
			}
		} else if !errors.Is(err, ErrReal) {
			t.Fatalf("error %v does not wrap ErrReal", err)
		}
	})
}

func TestExchangeRawSourceEmbedded(t *testing.T) {
	for _, want := range []string{"MPI_Isend", "MPI_Irecv", "raw_us_per_message"} {
		if !bytes.Contains(exchangeRawC, []byte(want)) {
			t.Errorf("embedded exchange_raw.c lacks %q", want)
		}
	}
}

func TestExchangeTable(t *testing.T) {
	rows := []exchangeRow{
		{samples: 1, g: GoExchange{Bytes: 100_000, ExchangeUSPer: 60, BareUSPer: 20}, raw: RawExchange{Bytes: 100_000, RawUSPer: 10}},
		{samples: 4, g: GoExchange{Bytes: 1_000_000, ExchangeUSPer: 400, BareUSPer: 150}, raw: RawExchange{Bytes: 1_000_000, RawUSPer: 100}},
	}
	s := exchangeTable(rows, 2)
	if len(s.Rows) != 2 {
		t.Fatalf("%d rows", len(s.Rows))
	}
	want := [][]float64{
		// exchange MB/s, bare MB/s, raw MB/s, exchange/raw, bare/raw, exchange/bare
		{100_000.0 / 60, 100_000.0 / 20, 100_000.0 / 10, 6, 2, 3},
		{1_000_000.0 / 400, 1_000_000.0 / 150, 1_000_000.0 / 100, 4, 1.5, 400.0 / 150},
	}
	for i, row := range s.Rows {
		if len(row) != len(s.Columns) {
			t.Fatalf("row %d: %d cells for %d columns", i, len(row), len(s.Columns))
		}
		got := []float64{row[3].(float64), row[5].(float64), row[7].(float64), row[8].(float64), row[9].(float64), row[10].(float64)}
		for k := range got {
			if math.Abs(got[k]-want[i][k]) > 1e-9*want[i][k] {
				t.Errorf("row %d column %s = %v, want %v", i, s.Columns[[]int{3, 5, 7, 8, 9, 10}[k]], got[k], want[i][k])
			}
		}
	}
	if want := "Go exchange path 4.00x and bare Go sends 1.50x the time of raw C MPI at 4 samples (1.00 MB); worst over sizes 6.00x and 2.00x"; s.Headline != want {
		t.Errorf("headline %q, want %q", s.Headline, want)
	}
}
