// Command datahelix is the data plane's one binary. Every rank of an MPI
// job runs the same command:
//
//	mpirun -np 4 datahelix info
//	srun datahelix run --data /scratch/shards
//	mpirun -np 8 datahelix train -- python train.py
//
// Run "datahelix help" for the list of commands.
package main

import "github.com/datahelix/datahelix/launcher"

func main() { launcher.Command() }
