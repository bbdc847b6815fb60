#pragma once
// An error some ranks met, made every rank's: each step of the run that can fail on some ranks
// ends with one of these, so no rank goes on alone into a collective.
#include <string>

#include <mpi.h>

namespace rb {

// True on every rank when any rank has an error; the lowest such rank prints it once.
bool first_error_reported(const std::string& error, const char* prefix, MPI_Comm world);

// True on every rank when any rank has an error; each such rank prints its own.
bool rank_errors_reported(const std::string& error, MPI_Comm world);

}  // namespace rb
