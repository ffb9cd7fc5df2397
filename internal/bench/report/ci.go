package report

import "math"

// tCrit975 is the two-sided 95 % quantile of Student's t for 1 to 10
// degrees of freedom (index: dof-1).
var tCrit975 = []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228}

// MeanCI returns the mean of xs and the half-width of its 95 % confidence
// interval (Student's t; 0 for fewer than two values).
func MeanCI(xs []float64) (mean, half float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(n)
	if n < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	t := 1.96
	if n-1 <= len(tCrit975) {
		t = tCrit975[n-2]
	}
	return mean, t * math.Sqrt(ss/float64(n-1)/float64(n))
}
