package main

import "testing"

func TestDetectLaunch(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want launchEnv
	}{
		{"none", map[string]string{}, launchEnv{"", -1, -1, -1, -1}},
		{"openmpi", map[string]string{
			"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
			"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
			"SLURM_PROCID": "0", "SLURM_STEP_ID": "4",
		}, launchEnv{"openmpi", 3, 8, 1, 2}},
		{"mpich hydra", map[string]string{
			"PMI_RANK": "5", "PMI_SIZE": "6", "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "3",
		}, launchEnv{"mpich", 5, 6, 2, 3}},
		{"pmix under srun", map[string]string{
			"PMIX_RANK": "7", "SLURM_LOCALID": "3", "SLURM_PROCID": "7", "SLURM_STEP_ID": "0",
		}, launchEnv{"pmix", 7, -1, 3, -1}},
		{"slurm", map[string]string{
			"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1",
			"SLURM_NTASKS_PER_NODE": "4", "SLURM_STEP_ID": "0",
		}, launchEnv{"slurm", 9, 16, 1, 4}},
		{"slurm batch script, no step: not a rank", map[string]string{
			"SLURM_PROCID": "0", "SLURM_NTASKS": "16",
		}, launchEnv{"", -1, -1, -1, -1}},
		{"garbage numbers", map[string]string{
			"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "-4",
		}, launchEnv{"openmpi", -1, -1, -1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := detectLaunch(func(k string) string { return tt.env[k] })
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
