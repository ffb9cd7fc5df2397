// Tiny C helpers for the MPI binding. Predefined MPI handles are macros
// that expand to addresses of library globals (OpenMPI) or to integer
// constants (MPICH); returning them from functions keeps the Go side
// independent of that difference.
#ifndef DATAHELIX_MPI_SHIM_H
#define DATAHELIX_MPI_SHIM_H

#include <mpi.h>
#include <sched.h>

static inline MPI_Comm dhmpi_comm_world(void) { return MPI_COMM_WORLD; }
static inline MPI_Datatype dhmpi_byte(void) { return MPI_BYTE; }
static inline MPI_Datatype dhmpi_int64(void) { return MPI_INT64_T; }
static inline MPI_Datatype dhmpi_int(void) { return MPI_INT; }
static inline MPI_Op dhmpi_op_sum(void) { return MPI_SUM; }
static inline MPI_Op dhmpi_op_min(void) { return MPI_MIN; }
static inline MPI_Op dhmpi_op_max(void) { return MPI_MAX; }
static inline MPI_Errhandler dhmpi_errors_return(void) { return MPI_ERRORS_RETURN; }
static inline MPI_Info dhmpi_info_null(void) { return MPI_INFO_NULL; }
static inline MPI_Request dhmpi_request_null(void) { return MPI_REQUEST_NULL; }
static inline void *dhmpi_in_place(void) { return MPI_IN_PLACE; }
static inline MPI_Status *dhmpi_statuses_ignore(void) { return MPI_STATUSES_IGNORE; }
static inline MPI_Status *dhmpi_status_ignore(void) { return MPI_STATUS_IGNORE; }
static inline int dhmpi_status_error(MPI_Status *s) { return s->MPI_ERROR; }
static inline void dhmpi_yield(void) { sched_yield(); }
static inline int dhmpi_any_source(void) { return MPI_ANY_SOURCE; }
static inline int dhmpi_status_source(MPI_Status *s) { return s->MPI_SOURCE; }

// dhmpi_init initializes MPI asking for MPI_THREAD_MULTIPLE and sets
// MPI_ERRORS_RETURN on MPI_COMM_WORLD. It returns the MPI error code and
// the granted thread level in *provided.
int dhmpi_init(int *provided);

// dhmpi_error_string writes the library's message for code into buf.
void dhmpi_error_string(int code, char *buf, int cap);

// dhmpi_error_class returns the MPI error class of code, or code itself when
// the library cannot classify it.
int dhmpi_error_class(int code);

// dhmpi_isend_parts starts one MPI_Isend of the n blocks at the absolute
// addresses addrs, of lens bytes each, concatenated: an hindexed datatype
// of MPI_BYTE sent from MPI_BOTTOM, freed at once (a pending send keeps
// what it needs). The receiver sees a plain message of MPI_BYTE. On an
// error, *failed is the call that failed: 0 MPI_Type_create_hindexed,
// 1 MPI_Type_commit, 2 MPI_Isend.
int dhmpi_isend_parts(int n, const int *lens, const MPI_Aint *addrs, int dest, int tag, MPI_Comm comm, MPI_Request *req, int *failed);

#endif
