// The wire kernels of quant.cu (stochastic_encode_rows and its decode, linear_encode_rows and its
// decode, bucket_ids with pack_codes, unpack_codes and bucket_dequantize) run on the host against
// cases cache_quant::Encoding wrote: `wire CASES` reads the file, runs each case thread by thread
// and prints one line per case that differs (bytes, decoded rows, or error sums beyond 1e-9),
// then `N cases, K differ`; the exit status is 1 when any differs. The block-wide reductions
// (min_max_partials, pair_sums_f64) are replaced by serial ones: a minimum or maximum does not
// depend on the order, and the sums are compared to 1e-9. See wire_kernels_on_host.rs for the
// case format.
#include "shim.h"
#include "../quant.cu"

#include <cstdio>
#include <vector>

static const unsigned char* at;
static unsigned rd32() { unsigned v; std::memcpy(&v, at, 4); at += 4; return v; }
static u64 rd64() { u64 v; std::memcpy(&v, at, 8); at += 8; return v; }
static double rdf64() { double v; std::memcpy(&v, at, 8); at += 8; return v; }

static bool close(double got, double want) {
    return got == want || std::fabs(got - want) <= 1e-9 * std::fmax(std::fabs(want), 1.0) ||
           (std::isnan(got) && std::isnan(want));
}

int main(int argc, char** argv) {
    if (argc != 2) { std::fprintf(stderr, "usage: wire CASES\n"); return 2; }
    std::FILE* file = std::fopen(argv[1], "rb");
    if (!file) { std::fprintf(stderr, "cannot open %s\n", argv[1]); return 2; }
    std::vector<unsigned char> buf;
    unsigned char chunk[1 << 16];
    for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, file)) > 0;) buf.insert(buf.end(), chunk, chunk + n);
    std::fclose(file);
    at = buf.data();
    unsigned cases = rd32(), differ = 0;
    for (unsigned c = 0; c < cases; ++c) {
        // kind (0 linear, 1 stochastic, 2 bucket), width, block rows, the block, the picked rows.
        unsigned kind = rd32(), d = rd32(), rows = rd32();
        std::vector<float> x(rows * d);
        for (auto& v : x) v = __uint_as_float(rd32());
        unsigned n = rd32();
        std::vector<u32> picked(n);
        for (auto& r : picked) r = rd32();
        // linear and bucket: bits; stochastic: key, a width per row, a global id per row.
        unsigned bits = 0;
        u64 key = 0;
        std::vector<u8> widths;
        std::vector<u32> gids;
        if (kind == 1) {
            key = rd64();
            widths.resize(n);
            for (auto& w : widths) w = *at++;
            gids.resize(n);
            for (auto& g : gids) g = rd32();
        } else {
            bits = rd32();
        }
        // The CPU's bytes, its decoded rows and its error sums.
        unsigned len = rd32();
        std::vector<u8> want(at, at + len);
        at += len;
        std::vector<float> back(n * d);
        for (auto& v : back) v = __uint_as_float(rd32());
        double err_sq = rdf64(), ref_sq = rdf64();

        std::vector<u8> got;
        std::vector<float> dec(n * d, 1e30f);  // the decoders write every value
        double err = 0, ref = 0;
        if (kind == 0) {
            u64 row_bytes = 8 + ((u64)d * bits + 7) / 8;
            got.assign(n * row_bytes, 0xAB);  // the kernel writes every byte
            halo_launch(n, [&] { linear_encode_rows(n, d, bits, row_bytes, x.data(), picked.data(), got.data()); });
            halo_launch((u64)n * d, [&] { linear_decode_rows(n, d, bits, row_bytes, got.data(), dec.data()); });
            err = err_sq, ref = ref_sq;  // the linear codec measures nothing
        } else if (kind == 1) {
            std::vector<u64> offsets(n);
            u64 total = 0;
            for (unsigned r = 0; r < n; ++r) offsets[r] = total, total += 8 + ((u64)d * widths[r] + 7) / 8;
            got.assign(total, 0xAB);  // the kernel writes every byte
            std::vector<float> row_err(n, 1e30f), row_norm(n, 1e30f);
            halo_launch(n, [&] {
                stochastic_encode_rows(n, d, x.data(), picked.data(), widths.data(), offsets.data(), gids.data(), key,
                                       got.data(), row_err.data(), row_norm.data());
            });
            for (unsigned r = 0; r < n; ++r) err += row_err[r], ref += row_norm[r];
            halo_launch((u64)n * d, [&] { stochastic_decode_rows(n, d, got.data(), widths.data(), offsets.data(), dec.data()); });
        } else {
            u64 count = (u64)n * d;
            std::vector<float> values(count);
            for (unsigned r = 0; r < n; ++r)
                for (unsigned j = 0; j < d; ++j) values[r * d + j] = x[picked[r] * d + j];
            float lo = __int_as_float(0x7f800000), hi = -__int_as_float(0x7f800000);
            for (float v : values) lo = fminf(lo, v), hi = fmaxf(hi, v);
            std::vector<u32> ids(count);
            std::vector<float> diff(count);
            halo_launch(count, [&] { bucket_ids(count, bits, values.data(), &lo, &hi, ids.data(), diff.data()); });
            u64 packed_len = (count * bits + 7) / 8;
            std::vector<u8> packed(packed_len, 0);
            halo_launch(packed_len, [&] { pack_codes(count, bits, ids.data(), packed.data()); });
            for (u64 i = 0; i < count; ++i) err += (double)diff[i] * diff[i], ref += (double)values[i] * values[i];
            if (count > 0) {
                u8 header[9] = {(u8)bits};
                std::memcpy(header + 1, &lo, 4);
                std::memcpy(header + 5, &hi, 4);
                got.insert(got.end(), header, header + 9);
                got.insert(got.end(), packed.begin(), packed.end());
                std::vector<u32> codes(count);
                halo_launch(count, [&] { unpack_codes(count, bits, got.data() + 9, codes.data()); });
                halo_launch(count, [&] { bucket_dequantize(count, 1u << bits, codes.data(), &lo, &hi, dec.data()); });
            }
        }
        bool bytes = got == want, decoded = true;
        for (size_t i = 0; i < dec.size(); ++i) {
            bool both_nan = std::isnan(dec[i]) && std::isnan(back[i]);
            if (__float_as_uint(dec[i]) != __float_as_uint(back[i]) && !both_nan) decoded = false;
        }
        bool sums = close(err, err_sq) && close(ref, ref_sq);
        if (!bytes || !decoded || !sums) {
            ++differ;
            size_t first = 0;
            while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
            std::printf("case %u (kind %u, width %u, bits %u): bytes %s (%zu against %zu, first difference at %zu), "
                        "decoded rows %s, error sums %s (%g against %g, %g against %g)\n",
                        c, kind, d, bits, bytes ? "equal" : "DIFFER", got.size(), want.size(), first,
                        decoded ? "equal" : "DIFFER", sums ? "equal" : "DIFFER", err, err_sq, ref, ref_sq);
        }
    }
    std::printf("%u cases, %u differ\n", cases, differ);
    return differ != 0;
}
