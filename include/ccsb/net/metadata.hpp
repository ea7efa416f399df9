// ccsb/net/metadata.hpp — the cloud metadata endpoints, one list for every
// part of ccsb that refuses them: egressd's address classes (N8,
// egressd/address_class.cpp) and the broker's terminal network rules (T2,
// ccsb/broker/net_decide.hpp). Pure data. The classifiers around it differ on
// purpose (egressd also refuses private ranges; the terminal's network is
// open) but a metadata address is a metadata address to both.
//
// The list: 169.254.169.254 (AWS, GCP, Azure IMDS, OpenStack, DigitalOcean,
// Oracle), 169.254.170.2 (AWS ECS task metadata), 169.254.170.23 (AWS EKS pod
// identity agent), 168.63.129.16 (Azure WireServer), 100.100.100.200 (Alibaba),
// 192.0.0.192 (Oracle Cloud Classic); fd00:ec2::254 and fd00:ec2::23 (AWS
// IMDS and its DNS over IPv6).
#pragma once

#include <array>
#include <cstdint>

namespace ccsb::net {

inline constexpr std::array<std::array<std::uint8_t, 4>, 6> kMetadataV4{{
    {169, 254, 169, 254},
    {169, 254, 170, 2},
    {169, 254, 170, 23},
    {168, 63, 129, 16},
    {100, 100, 100, 200},
    {192, 0, 0, 192},
}};

inline constexpr std::array<std::array<std::uint8_t, 16>, 2> kMetadataV6{{
    {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54},
    {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x23},
}};

constexpr bool is_metadata_v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) noexcept {
  for (const auto& m : kMetadataV4)
    if (m[0] == a && m[1] == b && m[2] == c && m[3] == d) return true;
  return false;
}

constexpr bool is_metadata_v6(const std::array<std::uint8_t, 16>& a) noexcept {
  for (const auto& m : kMetadataV6)
    if (m == a) return true;
  return false;
}

} // namespace ccsb::net
