// Package bench evaluates the loaders — torch, local, static, helix,
// helix-nogate and the simulation-only oracle — on eleven workloads and
// writes the report people look at (datahelix bench).
//
// # Workloads
//
// The workloads (workloads/*.json, embedded; fields in
// workloads/README.md) describe a training job built from public dataset
// statistics: a mixture of sources, each a preset of the generator
// (internal/gen) with the number of consecutive clips cut from one source
// video, shard size (shards are source-homogeneous), frames per clip,
// batch, decode workers W, the GPU step's shape and the cluster (ranks per
// node, slow nodes). Every statistic carries its source. One rule
// provisions them all: W is fixed and the GPU step time g makes the
// cluster's mean preparation throughput 1.2x the GPUs' consumption
// (Workload.GPUStep) for an ideal loader, whose GPUs train one mean batch
// per g; nothing is tuned per loader. When ranks read different sources
// and the GPU's time follows frames or tokens, loaders whose ranks train
// their own samples wait in lockstep for the slowest GPU: the report
// prints that LockstepFactor, a cost of those loaders.
//
// # Samples and costs
//
// Synth draws each source's samples with the generator's own gen.Spec,
// builds the record the parser would read from the encoded sample
// (syntheticRecord: frames, keyframes, B-frame order, frame sizes; image
// sizes; tokens) and prices it with the decode cost model calibrated on
// real decodes of this machine (Calibrate, datahelix bench calibrate,
// cached per hardware and decoder commit; DefaultCalibration otherwise,
// and the report says so). The true cost is the model's prediction; the
// estimate the planner sees carries a log-normal error with the measured
// held-out MAPE. Clips split into keyframe-aligned tasks with
// video.PlanTasks, as in the runtime. Calibrate also measures how
// far synthesized records price from the real ones (a few percent).
//
// # Evaluation and report
//
// RunSim runs every workload with every loader through sim.Run,
// which shares the runtime's scheduling policies, task building, rank
// progress and the real planner. NewReport compares helix with each
// baseline (reductions of miss rate and GPU wait, throughput ratios, the
// gap to the oracle), computes the summary the issue asks for and
// evaluates the goals (PASS or FALL SHORT with the figure). WriteText,
// WriteJSON, WriteCSV and WritePlots (gonum.org/v1/plot) render it.
//
// # Sections and real runs
//
// A report ends with sections, each produced by a SectionFunc, in the
// order of the sections table: "planner" (planner time versus ranks,
// RunPlanBench), "scale" (a simulated 1024-rank run, RunScale),
// "allgather", "exchange" and "decode" (measured under mpirun and
// against ffmpeg), "validation" and "real". A section that fails is
// reported as failed and the rest still runs. Real runs (--real,
// RunReal) are mpirun jobs of datahelix run on generated data; their
// results have the simulator's Result fields, and ValidationSection compares
// simulated and real results with the rule (GPU wait fraction
// within 20 % relative, miss rate within 0.10 absolute). For that
// comparison NewDatasetSamples feeds the simulator the very samples a
// real run reads from a generated dataset, in the runtime's reader order
// (the simulated batches_hash equals the real one), and
// Workload.GPUStep and Workload.GPUModel give the GPU flags of the real
// run by the same provisioning rule. Each real run is simulated as it
// ran, with what it measured of the machine besides its waits and
// misses: the cores its ranks were pinned to, the CPU time each rank
// spent (its whole process's by its first delivery, its decode workers'
// after it), the gradient allreduce it took, and other processes' threads
// (sim.CPUShare.Others) taking the cores they took; the simulated
// figure is the mean over the runs, as the real one is.
package bench
