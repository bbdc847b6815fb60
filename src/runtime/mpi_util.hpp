#pragma once
// The few MPI idioms every SPMD step needs (rank 0 decides, everyone agrees, the first rank
// that failed speaks). Header-only on <mpi.h> alone, so src/metrics can use them without
// linking the runtime library. All functions except world_rank_or_minus_one are collective.
#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>

namespace rb::mpi {

inline int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

inline int size_of(MPI_Comm comm) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  return n;
}

// For error messages written where MPI may not be running (yet or any more).
inline int world_rank_or_minus_one() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  return rank_of(MPI_COMM_WORLD);
}

// Rank 0's string on every rank.
inline void broadcast_string(std::string& s, MPI_Comm comm) {
  std::uint64_t n = s.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm);
  s.resize(n);
  if (n > 0) MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, comm);
}

// Every rank contributes a flag; all get the OR. Used wherever one rank may see a problem the
// others do not (a GPU missing on one node), so no rank goes on alone into a collective.
inline bool any_rank(bool flag, MPI_Comm comm) {
  int local = flag ? 1 : 0, global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, comm);
  return global != 0;
}

// The lowest rank whose flag is set; the communicator's size when none is.
inline int first_rank_with(bool flag, MPI_Comm comm) {
  int mine = flag ? rank_of(comm) : size_of(comm), first = 0;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  return first;
}

// Every rank's string, in rank order, on every rank.
inline std::vector<std::string> gather_strings(const std::string& mine, MPI_Comm comm) {
  const int size = size_of(comm);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size), displs(size);
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm);
  int total = 0;
  for (int i = 0; i < size; ++i) {
    displs[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                 comm);
  std::vector<std::string> out;
  out.reserve(size);
  for (int i = 0; i < size; ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

}  // namespace rb::mpi
