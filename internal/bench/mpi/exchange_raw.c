/* Raw MPI reference for the exchange section of datahelix bench: rank 0
 * sends a message of BYTES bytes to rank 1 ROUNDS times, each
 * acknowledged, exactly as spmd.MeasureExchange's bare path does, and
 * prints the mean microseconds per message. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	int provided, rank;
	long bytes = argc > 1 ? atol(argv[1]) : 1 << 20;
	int rounds = argc > 2 ? atoi(argv[2]) : 50;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm comm;
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	MPI_Comm_rank(comm, &rank);
	char *buf = calloc(bytes ? bytes : 1, 1);
	char ack = 0;
	double total = 0;
	for (int i = -2; i < rounds; i++) {
		MPI_Request r[2];
		MPI_Barrier(comm);
		double t = MPI_Wtime();
		if (rank == 0) {
			MPI_Isend(buf, (int)bytes, MPI_BYTE, 1, 7, comm, &r[0]);
			MPI_Irecv(&ack, 1, MPI_BYTE, 1, 8, comm, &r[1]);
			MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
		} else if (rank == 1) {
			MPI_Irecv(buf, (int)bytes, MPI_BYTE, 0, 7, comm, &r[0]);
			MPI_Wait(&r[0], MPI_STATUS_IGNORE);
			MPI_Isend(&ack, 1, MPI_BYTE, 0, 8, comm, &r[1]);
			MPI_Wait(&r[1], MPI_STATUS_IGNORE);
		}
		if (i >= 0)
			total += MPI_Wtime() - t;
	}
	if (rank == 0)
		printf("{\"bytes\":%ld,\"messages\":%d,\"raw_us_per_message\":%.3f}\n", bytes, rounds, total / rounds * 1e6);
	MPI_Comm_free(&comm);
	MPI_Finalize();
	return 0;
}
