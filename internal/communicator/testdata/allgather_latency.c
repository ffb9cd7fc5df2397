/* The reference for BenchmarkAllgatherGoVsC: the same allgather loop as
 * the Go worker, written directly against MPI. Prints rank 0's median
 * round time in microseconds. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv) {
	int provided, rank, size;
	int bytes = argc > 1 ? atoi(argv[1]) : 1024;
	int rounds = argc > 2 ? atoi(argv[2]) : 2000;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm comm;
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &size);
	char *send = calloc(bytes ? bytes : 1, 1);
	char *recv = calloc(bytes ? (size_t)bytes * size : 1, 1);
	double *us = malloc(sizeof(double) * rounds);
	for (int i = 0; i < 20; i++)
		MPI_Allgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, comm);
	MPI_Barrier(comm);
	for (int i = 0; i < rounds; i++) {
		double t = MPI_Wtime();
		MPI_Allgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, comm);
		us[i] = (MPI_Wtime() - t) * 1e6;
	}
	qsort(us, rounds, sizeof(double), cmp);
	if (rank == 0)
		printf("p50_us %.3f\n", us[rounds / 2]);
	MPI_Comm_free(&comm);
	MPI_Finalize();
	return 0;
}
