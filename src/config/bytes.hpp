#pragma once
// Byte sizes as people write and read them: one parser (config values, command-line options)
// and one formatter (plans, progress lines, tables) for the whole program.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rb {

// "1048576", "64KiB", "64 KiB", "1MiB", "2GiB", "1TiB", "1KB", "1MB", "1GB" (powers of 10), "0B".
// nullopt with *why set when the text is not a byte size or does not fit in 64 bits.
std::optional<std::uint64_t> parse_bytes(const std::string& text, std::string* why = nullptr);
// The suffixes parse_bytes accepts, for messages.
std::vector<std::string> byte_suffixes();

// Binary units: "64 KiB" when exact, else one decimal ("1.5 MiB"); "512 B" below 1 KiB.
std::string format_bytes(double bytes);

}  // namespace rb
