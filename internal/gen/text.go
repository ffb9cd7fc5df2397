package gen

import (
	"math/rand/v2"
	"strings"
)

// vocabulary is a fixed list of common English words: generated text has
// realistic word lengths and token counts, and is deterministic for a seed.
var vocabulary = strings.Fields(`the of and to in a is that for it as was with be by on not he
i this are or his from at which but have an they you were her she there one all we their
can has been if more when will would who so no time people video shows man woman child
hands table kitchen cooking water street car dog cat ball playing running walking talking
camera close view person outdoor indoor light small large red blue green white black
wooden metal paper bowl knife onion garden tree grass sky road bicycle guitar piano dance
music sport field team players game shot scene slowly quickly then first after before
while during about into over under between through around step make use add cut mix pour
place turn hold open close show explain how way water oil salt pepper sugar flour egg
building city house room window door wall floor phone computer screen keyboard book page
write read learn teach class student teacher morning evening night day week year old new`)

// words returns n words of seeded text in sentences of 6 to 20 words.
func words(r *rand.Rand, n int) string {
	var b strings.Builder
	left := 0
	for i := range n {
		w := vocabulary[r.IntN(len(vocabulary))]
		if left == 0 {
			if i > 0 {
				b.WriteString(". ")
			}
			left = 6 + r.IntN(15)
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		left--
	}
	if n > 0 {
		b.WriteByte('.')
	}
	return b.String()
}
