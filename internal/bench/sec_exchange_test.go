package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/wire"
)

// Lines that datahelix bench exchange and exchange_raw printed here.
const (
	goExchangeOut  = `{"bytes":4690931,"samples":16,"messages":400,"exchange_us_per_message":160.29,"packed_us_per_message":242.37,"bare_us_per_message":140.03,"exchange_mb_per_s":29265.0,"packed_mb_per_s":19354.4,"bare_mb_per_s":33499.5,"exchange_over_bare":1.145,"exchange_over_packed":0.661}` + "\n"
	rawExchangeOut = `{"bytes":250000,"messages":300,"raw_us_per_message":19.710}` + "\n"
)

func TestParseExchange(t *testing.T) {
	g, err := ParseGoExchange([]byte("datahelix: generating the default dataset\n" + goExchangeOut))
	if err != nil || g.Bytes != 4690931 || g.Samples != 16 || g.Messages != 400 || g.ExchangeUSPer != 160.29 || g.PackedUSPer != 242.37 || g.BareUSPer != 140.03 || g.ExchangeOnPacked != 0.661 {
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
		{"zero time", `{"bytes":10,"messages":3,"exchange_us_per_message":0,"packed_us_per_message":1,"bare_us_per_message":1}`, "implausible", false},
		{"no packed time", `{"bytes":10,"messages":3,"exchange_us_per_message":1,"bare_us_per_message":1}`, "implausible", false},
		{"no bytes", `{"messages":3,"exchange_us_per_message":1,"packed_us_per_message":1,"bare_us_per_message":1}`, "implausible", false},
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
		if err == nil || !errors.Is(err, realrun.ErrReal) || !strings.Contains(err.Error(), tt.err) {
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
			if g.Bytes <= 0 || !(g.ExchangeUSPer > 0) || !(g.PackedUSPer > 0) || !(g.BareUSPer > 0) || g.Messages < 1 {
				t.Fatalf("accepted %+v", g)
			}
		} else if !errors.Is(err, realrun.ErrReal) {
			t.Fatalf("error %v does not wrap ErrReal", err)
		}
		if r, err := ParseRawExchange(data); err == nil {
			if r.Bytes < 0 || !(r.RawUSPer > 0) || r.Messages < 1 {
				t.Fatalf("accepted %+v", r)
			}
		} else if !errors.Is(err, realrun.ErrReal) {
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
		{samples: 1, g: GoExchange{Bytes: 100_000, ExchangeUSPer: 60, PackedUSPer: 50, BareUSPer: 20}, raw: RawExchange{Bytes: 100_000, RawUSPer: 10}},
		{samples: 4, g: GoExchange{Bytes: 1_000_000, ExchangeUSPer: 400, PackedUSPer: 800, BareUSPer: 150}, raw: RawExchange{Bytes: 1_000_000, RawUSPer: 100}},
	}
	s := exchangeTable(rows, 2)
	if len(s.Rows) != 2 {
		t.Fatalf("%d rows", len(s.Rows))
	}
	want := [][]float64{
		// exchange MB/s, bare MB/s, raw MB/s, exchange/raw, bare/raw, exchange/bare, packed MB/s, exchange/packed
		{100_000.0 / 60, 100_000.0 / 20, 100_000.0 / 10, 6, 2, 3, 100_000.0 / 50, 1.2},
		{1_000_000.0 / 400, 1_000_000.0 / 150, 1_000_000.0 / 100, 4, 1.5, 400.0 / 150, 1_000_000.0 / 800, 0.5},
	}
	cols := []int{3, 5, 7, 8, 9, 10, 12, 13}
	for i, row := range s.Rows {
		if len(row) != len(s.Columns) {
			t.Fatalf("row %d: %d cells for %d columns", i, len(row), len(s.Columns))
		}
		for k, c := range cols {
			if got := row[c].(float64); math.Abs(got-want[i][k]) > 1e-9*want[i][k] {
				t.Errorf("row %d column %s = %v, want %v", i, s.Columns[c], got, want[i][k])
			}
		}
	}
	if want := "Go exchange path 4.00x and bare Go sends 1.50x the time of raw C MPI at 4 samples (1.00 MB); worst over sizes 6.00x and 2.00x; " +
		"the exchange path takes 0.50x the time of packing first"; s.Headline != want {
		t.Errorf("headline %q, want %q", s.Headline, want)
	}
}

// TestNewGoExchangeRounds checks the rounding against formatting the
// figures with fmt at the stated precision, on random measurements.
func TestNewGoExchangeRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parse := func(format string, v float64) float64 {
		f, err := strconv.ParseFloat(fmt.Sprintf(format, v), 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for i := 0; i < 1000; i++ {
		const messages = 50
		st := wire.ExchangeStats{Bytes: 1 + rng.Int64N(1<<26), Messages: messages,
			Exchange: time.Duration(math.Exp(rng.Float64()*18-6) * 1e3 * messages),
			Packed:   time.Duration(math.Exp(rng.Float64()*18-6) * 1e3 * messages),
			Bare:     time.Duration(math.Exp(rng.Float64()*18-6) * 1e3 * messages)}
		got := NewGoExchange(st, 4)
		exUS, packUS, bareUS := float64(st.Exchange)/messages/1e3, float64(st.Packed)/messages/1e3, float64(st.Bare)/messages/1e3
		ex, pack, bare := max(parse("%.2f", exUS), 0.01), max(parse("%.2f", packUS), 0.01), max(parse("%.2f", bareUS), 0.01)
		want := GoExchange{Bytes: st.Bytes, Samples: 4, Messages: messages, ExchangeUSPer: ex, PackedUSPer: pack, BareUSPer: bare,
			ExchangeMBps: parse("%.1f", float64(st.Bytes)/ex), PackedMBps: parse("%.1f", float64(st.Bytes)/pack), BareMBps: parse("%.1f", float64(st.Bytes)/bare),
			ExchangeOnBare: parse("%.3f", ex/bare), ExchangeOnPacked: parse("%.3f", ex/pack)}
		// fmt rounds the exact binary value, math.Round the product
		// v*100: they may differ within a hair of a tie, never elsewhere.
		if got != want && !nearTie(exUS*100) && !nearTie(packUS*100) && !nearTie(bareUS*100) &&
			!nearTie(float64(st.Bytes)/ex*10) && !nearTie(float64(st.Bytes)/pack*10) && !nearTie(float64(st.Bytes)/bare*10) &&
			!nearTie(ex/bare*1000) && !nearTie(ex/pack*1000) {
			t.Fatalf("NewGoExchange(%+v)\n got %+v\nwant %+v", st, got, want)
		}
		line, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDecimals(string(line)); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
}

// exchangeDecimals is how many decimals each figure of bench exchange's
// JSON line may have.
var exchangeDecimals = map[string]int{"exchange_us_per_message": 2, "bare_us_per_message": 2,
	"exchange_mb_per_s": 1, "bare_mb_per_s": 1, "exchange_over_bare": 3}

// checkDecimals checks the number of decimals of the figures of a JSON
// line of bench exchange, as printed.
func checkDecimals(line string) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return err
	}
	for k, n := range exchangeDecimals {
		v, ok := raw[k]
		if !ok {
			return fmt.Errorf("no %s", k)
		}
		if _, frac, _ := strings.Cut(string(v), "."); len(frac) > n || strings.ContainsAny(string(v), "eE") {
			return fmt.Errorf("%s is %s, want at most %d decimals", k, v, n)
		}
	}
	return nil
}

// nearTie reports whether v is within a hair of n + 0.5.
func nearTie(v float64) bool {
	_, f := math.Modf(v)
	return math.Abs(f-0.5) < 1e-6
}
