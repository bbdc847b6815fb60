#pragma once
// SHA-256 of a byte string as 64 lowercase hex digits (FIPS 180-4), so a run records exactly
// which tuned policy file it followed and `sha256sum FILE` can confirm it.
#include <string>

namespace rb {

std::string sha256_hex(const std::string& bytes);

}  // namespace rb
