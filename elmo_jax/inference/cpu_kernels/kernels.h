// Vector arithmetic, the register-blocked matmul loop and the threads shared by the CPU kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace elmo_kernels {

#if defined(__AVX512F__)
constexpr int V = 16;  // floats per vector register
constexpr int ROWS = 8;  // rows per register block
#else
constexpr int V = 8;
constexpr int ROWS = 4;
#endif

typedef float vec __attribute__((vector_size(V * sizeof(float))));
typedef int32_t ivec __attribute__((vector_size(V * sizeof(int32_t))));

inline vec splat(float x) { return vec{} + x; }
inline vec load(const float* p) { vec v; std::memcpy(&v, p, sizeof v); return v; }
inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }
// One instruction each where the ISA has one (the ternaries alone compile to a compare and a blend).
#if defined(__AVX512F__)
inline vec vmin(vec a, vec b) { return vec(_mm512_min_ps(__m512(a), __m512(b))); }
inline vec vmax(vec a, vec b) { return vec(_mm512_max_ps(__m512(a), __m512(b))); }
#elif defined(__AVX__)
inline vec vmin(vec a, vec b) { return vec(_mm256_min_ps(__m256(a), __m256(b))); }
inline vec vmax(vec a, vec b) { return vec(_mm256_max_ps(__m256(a), __m256(b))); }
#else
inline vec vmin(vec a, vec b) { return a < b ? a : b; }
inline vec vmax(vec a, vec b) { return a > b ? a : b; }
#endif
inline vec clip(vec x, float c) { return c > 0 ? vmin(vmax(x, splat(-c)), splat(c)) : x; }

// exp(x) to about 1 ulp on [-87.3, 88.3] (Cephes' expf: x = n ln2 + r, a degree-6 polynomial in r).
inline vec vexp(vec x) {
  x = vmin(vmax(x, splat(-87.3f)), splat(88.3f));
  const vec magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const vec n = (x * 1.44269504088896341f + magic) - magic;
  const vec r = x - n * 0.693359375f - n * -2.12194440e-4f;
  vec p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const ivec bits = (__builtin_convertvector(n, ivec) + 127) << 23;
  vec scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
inline vec sigmoid(vec x) { return 1.0f / (1.0f + vexp(-x)); }
inline vec tanh_(vec x) { return 1.0f - 2.0f / (vexp(x + x) + 1.0f); }

inline int round_up(int n, int k) { return (n + k - 1) / k * k; }

// acc[r][n] += x[r, :k] . panel[:k, n] for R rows and N vectors of outputs: one register block.
// x: packed [k][R] (the R values broadcast at each k are adjacent); panel: [k][N][V].
template <int R, int N>
inline void accumulate(vec (&acc)[R][N], const float* x, const float* panel, int k_size) {
  for (int k = 0; k < k_size; ++k) {
    vec w[N];
#pragma GCC unroll 4
    for (int n = 0; n < N; ++n) w[n] = load(panel + (size_t(k) * N + n) * V);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float a = x[size_t(k) * R + r];
#pragma GCC unroll 4
      for (int n = 0; n < N; ++n) acc[r][n] += a * w[n];
    }
  }
}

// Matmul operands packed for the register blocks: [rows / ROWS][k][ROWS], the ROWS values that a
// block broadcasts at each k adjacent (one cache line instead of ROWS).
struct Packed {
  int k_size;
  std::vector<float> data;
  Packed(int rows_p, int k) : k_size(k), data(size_t(rows_p) * k) {}
  const float* block(int r0) const { return &data[size_t(r0) * k_size]; }  // r0: a multiple of ROWS
  float& at(int r, int k) { return data[(size_t(r / ROWS) * k_size + k) * ROWS + r % ROWS]; }
  float at(int r, int k) const { return data[(size_t(r / ROWS) * k_size + k) * ROWS + r % ROWS]; }
  void set_row(int r, const float* row, int n) { for (int k = 0; k < n; ++k) at(r, k) = row[k]; }
};

// z[r][n] += x[r, :] . panel[:, n] for rows [0, n_rows) (a multiple of ROWS) and N vectors of
// outputs: x packed `[rows, k]`, panel `[k][N][V]`, row r's N vectors at z + r * z_stride.
// k_chunk of k at a time, each summed from zero and then added to z: every row block reads that
// chunk of the panel (which can stay in L1), and a long sum's rounding error grows with k_chunk
// and k / k_chunk instead of k.
template <int N>
inline void add_panel(vec* z, int z_stride, const Packed& x, const float* panel, int n_rows, int k_chunk) {
  for (int k0 = 0; k0 < x.k_size; k0 += k_chunk) {
    const int k_size = std::min(k_chunk, x.k_size - k0);
    for (int r0 = 0; r0 < n_rows; r0 += ROWS) {
      vec acc[ROWS][N] = {};
      accumulate(acc, x.block(r0) + size_t(k0) * ROWS, panel + size_t(k0) * N * V, k_size);
#pragma GCC unroll 8
      for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 4
        for (int n = 0; n < N; ++n) z[size_t(r0 + r) * z_stride + n] += acc[r][n];
    }
  }
}

// Gate columns packed in panels: w `[k, n_gates * dim]` (gate g's column u at g * dim + u) ->
// `[dim_p / V][n_gates / GROUP][k][GROUP][V]` (cells zero padded to dim_p): each panel holds all
// gates of the same V cells, and a register block's GROUP gates are contiguous at each k.
template <int GROUP>
std::vector<float> pack_gates(const float* w, int k_size, int n_gates, int dim, int dim_p) {
  std::vector<float> out(size_t(dim_p) * k_size * n_gates, 0.0f);
  for (int u0 = 0; u0 < dim_p; u0 += V)
    for (int g = 0; g < n_gates; ++g)
      for (int k = 0; k < k_size; ++k)
        for (int l = 0; l < V && u0 + l < dim; ++l)
          out[(((size_t(u0 / V) * n_gates + g / GROUP * GROUP) * k_size + size_t(k) * GROUP) + g % GROUP) * V + l] =
              w[size_t(k) * n_gates * dim + size_t(g) * dim + u0 + l];
  return out;
}

// Gate biases `[n_gates * dim]` -> `[n_gates][dim_p]`, each gate's zero padded to dim_p (to be read
// a panel of V at a time, as `pack_gates` packs the weights).
inline std::vector<float> pad_gates(const float* b, int n_gates, int dim, int dim_p) {
  std::vector<float> out(size_t(n_gates) * dim_p, 0.0f);
  for (int g = 0; g < n_gates; ++g) std::copy_n(b + size_t(g) * dim, dim, &out[size_t(g) * dim_p]);
  return out;
}

// Columns [n0, n0 + COLS) of w `[k, n]` for each of n_p / COLS panels: `[n_p / COLS][k][COLS]`.
template <int COLS>
std::vector<float> pack_panels(const float* w, int k_size, int n, int n_p) {
  std::vector<float> out(size_t(n_p) * k_size, 0.0f);
  for (int n0 = 0; n0 < n_p; n0 += COLS)
    for (int k = 0; k < k_size; ++k)
      for (int l = 0; l < COLS && n0 + l < n; ++l) out[(size_t(n0 / COLS) * k_size + k) * COLS + l] = w[size_t(k) * n + n0 + l];
  return out;
}

// Runs fn(copy, begin, end) over [0, n) for each of `copies` independent passes (the directions
// of a biLM, or 1), each split into ranges (multiples of granule) so that all of them together
// take up to n_threads threads, each range on its own thread.
template <class Fn>
void parallel_ranges(int copies, int n, int n_threads, int granule, Fn fn) {
  const int parts = std::max(1, std::min(std::max(1, n_threads / copies), (n + granule - 1) / granule));
  const int per_part = round_up((n + parts - 1) / parts, granule);
  std::vector<std::thread> threads;
  for (int copy = 0; copy < copies; ++copy)
    for (int begin = 0; begin < n; begin += per_part) threads.emplace_back(fn, copy, begin, std::min(n, begin + per_part));
  for (auto& t : threads) t.join();
}

}  // namespace elmo_kernels
