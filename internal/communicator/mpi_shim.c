//go:build !nompi

#include <string.h>
#include "mpi_shim.h"

int dhmpi_init(int *provided) {
	int initialized = 0;
	MPI_Initialized(&initialized);
	if (initialized) {
		MPI_Query_thread(provided);
		return MPI_SUCCESS;
	}
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
	if (rc != MPI_SUCCESS) {
		return rc;
	}
	return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void dhmpi_error_string(int code, char *buf, int cap) {
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;
	if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) {
		len = 0;
	}
	if (len >= cap) {
		len = cap - 1;
	}
	memcpy(buf, msg, len);
	buf[len] = 0;
}

int dhmpi_error_class(int code) {
	int cls = code;
	if (MPI_Error_class(code, &cls) != MPI_SUCCESS) {
		return code;
	}
	return cls;
}

int dhmpi_isend_parts(int n, const int *lens, const MPI_Aint *addrs, int dest, int tag, MPI_Comm comm, MPI_Request *req, int *failed) {
	MPI_Datatype t;
	*failed = 0;
	int rc = MPI_Type_create_hindexed(n, lens, addrs, MPI_BYTE, &t);
	if (rc != MPI_SUCCESS) {
		return rc;
	}
	*failed = 1;
	rc = MPI_Type_commit(&t);
	if (rc == MPI_SUCCESS) {
		*failed = 2;
		rc = MPI_Isend(MPI_BOTTOM, 1, t, dest, tag, comm, req);
	}
	MPI_Type_free(&t);
	return rc;
}
