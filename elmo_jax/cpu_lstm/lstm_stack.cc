// The biLM's LSTM-with-projection stack over token streams, for inference on CPUs.
//
// Computes what `BiLM.contextualize_from_gates` computes (lstm_recurrence.py has the equations),
// for all layers and all steps in one call. Every (direction, block of rows) is an independent
// task on its own thread: rows and directions never interact, so the tasks share nothing and
// never wait for each other. Per step and layer, a task makes one pass over its direction's
// W_hidden (and W_input above the first layer), packed in panels that hold the i, j, f, o columns
// of the same V cells. A register block computes those four gates of ROWS rows, and the gate
// arithmetic runs while the panel's outputs are still in the cache; then h' = m W_P. The first
// layer's x W_input is read from a table of one row per distinct word.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

#if defined(__AVX512F__)
constexpr int V = 16;  // floats per vector register
constexpr int ROWS = 8;  // rows per register block
#else
constexpr int V = 8;
constexpr int ROWS = 4;
#endif
constexpr int GATE_VECTORS = 2;  // gates per register block (of the 4 of a panel): ROWS x 2 accumulators
constexpr int PROJ_VECTORS = 2;  // projection outputs per register block: PROJ_VECTORS x V
constexpr int PROJ_COLS = PROJ_VECTORS * V;
constexpr int PREFETCH_PANELS = 2;  // how far ahead the table rows of the first layer are fetched

typedef float vec __attribute__((vector_size(V * sizeof(float))));
typedef int32_t ivec __attribute__((vector_size(V * sizeof(int32_t))));

inline vec splat(float x) { return vec{} + x; }
inline vec load(const float* p) { vec v; std::memcpy(&v, p, sizeof v); return v; }
inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }
inline vec vmin(vec a, vec b) { return a < b ? a : b; }
inline vec vmax(vec a, vec b) { return a > b ? a : b; }
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

// z[r][g0 + g] += x[r, :k] . panel[:k, g] for R rows and G gates: one register block.
// x: R rows of stride x_stride; panel: [k][G][V], gates g0 .. g0 + G - 1; z: [R][4] vectors.
template <int R, int G>
inline void gate_block(vec* z, int g0, const float* x, int x_stride, const float* panel, int k_size) {
  vec acc[R][G];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) acc[r][g] = z[r * 4 + g0 + g];
  for (int k = 0; k < k_size; ++k) {
    vec w[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) w[g] = load(panel + (size_t(k) * G + g) * V);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float a = x[size_t(r) * x_stride + k];
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[r][g] += a * w[g];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) z[r * 4 + g0 + g] = acc[r][g];
}

// out[r, :Q V] = m[r, :k] . panel for R rows: one register block of the projection.
// m: R rows of stride m_stride; panel: [k][Q V]; out: R rows of stride out_stride.
template <int R, int Q>
inline void proj_block(const float* m, int m_stride, const float* panel, int k_size, float* out, int out_stride) {
  vec acc[R][Q] = {};
  for (int k = 0; k < k_size; ++k) {
    vec w[Q];
#pragma GCC unroll 4
    for (int q = 0; q < Q; ++q) w[q] = load(panel + size_t(k) * Q * V + q * V);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float a = m[size_t(r) * m_stride + k];
#pragma GCC unroll 4
      for (int q = 0; q < Q; ++q) acc[r][q] += a * w[q];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < Q; ++q) store(out + size_t(r) * out_stride + q * V, acc[r][q]);
}

}  // namespace

extern "C" {

// The arguments of `elmo_lstm_stack` (mirrored by elmo_jax/cpu_lstm/__init__.py). L layers, both
// directions; `proj == dim` with `w_proj == nullptr`: no projection (h = m). Clips <= 0: none.
struct LstmStackArgs {
  int32_t n_layers, rows, steps, dim, proj, words, residual, n_threads;
  float cell_clip, proj_clip;
  const float* gate_table;  // [2, words, 4 dim]: the first layer's x W_input of each word
  const int32_t* ids;       // [2, rows, steps]: the word at each position (a row of gate_table)
  const int32_t* lengths;   // [rows]: row r runs steps [0, lengths[r]); its state stays after
  const uint8_t* reset;     // [rows, steps] or nullptr: the state becomes reset_* before the step
  const float* bias;        // [L, 2, 4 dim]
  const float* w_input;     // [L - 1, 2, proj, 4 dim]: the layers above the first
  const float* w_hidden;    // [L, 2, proj, 4 dim]
  const float* w_proj;      // [L, 2, dim, proj] or nullptr
  const float* reset_c;     // [L, 2, dim]
  const float* reset_h;     // [L, 2, proj]
  float* c;                 // [L, 2, rows, dim]: the initial states, replaced by the final ones
  float* h;                 // [L, 2, rows, proj]
  float* out;               // [L, 2, rows, steps, proj]: each layer's output (h, + its input
                            // above the first layer with `residual`); positions past a row's
                            // length are left as they are
};

}  // extern "C"

namespace {

// One layer's weights of one direction, packed. hidden, input: [dim_p / V][4 / GATE_VECTORS][proj]
// [GATE_VECTORS][V] (cells zero padded to dim_p): a register block's columns are contiguous;
// proj: [proj_p / PROJ_COLS][dim][PROJ_COLS].
struct PackedLayer {
  std::vector<float> hidden, input, proj, bias;  // bias: [4][dim_p]
};

std::vector<float> pack_gates(const float* w, int k_size, int dim, int dim_p) {
  std::vector<float> out(size_t(dim_p) * k_size * 4, 0.0f);
  constexpr int GV = GATE_VECTORS;
  for (int u0 = 0; u0 < dim_p; u0 += V)
    for (int g = 0; g < 4; ++g)
      for (int k = 0; k < k_size; ++k)
        for (int l = 0; l < V && u0 + l < dim; ++l)
          out[(((size_t(u0 / V) * 4 + g / GV * GV) * k_size + size_t(k) * GV) + g % GV) * V + l] =
              w[size_t(k) * 4 * dim + g * dim + u0 + l];
  return out;
}

std::vector<float> pack_proj(const float* w, int dim, int proj, int proj_p) {
  std::vector<float> out(size_t(proj_p) * dim, 0.0f);
  for (int j0 = 0; j0 < proj_p; j0 += PROJ_COLS)
    for (int k = 0; k < dim; ++k)
      for (int l = 0; l < PROJ_COLS && j0 + l < proj; ++l)
        out[(size_t(j0 / PROJ_COLS) * dim + k) * PROJ_COLS + l] = w[size_t(k) * proj + j0 + l];
  return out;
}

// The state and scratch of one layer for a task's rows (row strides one vector longer than the
// rows: rows 4 KiB apart would share cache sets).
struct LayerRows {
  int m_stride, h_stride;
  std::vector<float> c, m, h, h_raw, y;  // y: the layer's output at this step
  LayerRows(int rows_p, int dim_p, int proj_p)
      : m_stride(dim_p + V), h_stride(proj_p + V),
        c(size_t(rows_p) * m_stride), m(size_t(rows_p) * m_stride),
        h(size_t(rows_p) * h_stride), h_raw(size_t(rows_p) * h_stride), y(size_t(rows_p) * h_stride) {}
};

class Task {
 public:
  Task(const LstmStackArgs& a, const std::vector<PackedLayer>& packed, int d, int row0, int n_rows)
      : a_(a), packed_(packed), d_(d), row0_(row0), n_rows_(n_rows),
        dim_p_(round_up(a.dim, V)), proj_p_(round_up(a.proj, PROJ_COLS)), rows_p_(round_up(n_rows, ROWS)),
        gates_(4 * a.dim), live_(rows_p_, 0), table_rows_(rows_p_), z_(size_t(rows_p_) * 4) {
    for (int l = 0; l < a.n_layers; ++l) layers_.emplace_back(rows_p_, dim_p_, proj_p_);
  }

  void run() {
    for (int l = 0; l < a_.n_layers; ++l)
      for (int r = 0; r < n_rows_; ++r) {
        std::memcpy(&layers_[l].c[size_t(r) * layers_[l].m_stride], &a_.c[state_row(l, r) * a_.dim], sizeof(float) * a_.dim);
        std::memcpy(&layers_[l].h[size_t(r) * layers_[l].h_stride], &a_.h[state_row(l, r) * a_.proj], sizeof(float) * a_.proj);
      }
    for (int t = 0; t < a_.steps; ++t) {
      int live_rows = 0;  // rows [0, live_rows) hold every row that runs this step
      for (int r = 0; r < rows_p_; ++r) {
        const int row = row0_ + r;
        live_[r] = r < n_rows_ && t < a_.lengths[row];
        if (live_[r]) live_rows = r + 1;
        const size_t word = live_[r] ? a_.ids[(size_t(d_) * a_.rows + row) * a_.steps + t] : 0;
        table_rows_[r] = live_[r] ? a_.gate_table + (size_t(d_) * a_.words + word) * gates_ : nullptr;
      }
      if (live_rows == 0) continue;
      const int blocks = round_up(live_rows, ROWS);
      for (int l = 0; l < a_.n_layers; ++l) step_layer(l, t, blocks);
    }
    for (int l = 0; l < a_.n_layers; ++l)
      for (int r = 0; r < n_rows_; ++r) {
        std::memcpy(&a_.c[state_row(l, r) * a_.dim], &layers_[l].c[size_t(r) * layers_[l].m_stride], sizeof(float) * a_.dim);
        std::memcpy(&a_.h[state_row(l, r) * a_.proj], &layers_[l].h[size_t(r) * layers_[l].h_stride], sizeof(float) * a_.proj);
      }
  }

 private:
  size_t state_row(int l, int r) const { return (size_t(l) * 2 + d_) * a_.rows + row0_ + r; }

  // Layer l at step t for rows [0, n_rows) (a multiple of ROWS).
  void step_layer(int l, int t, int n_rows) {
    LayerRows& s = layers_[l];
    const PackedLayer& w = packed_[l];
    for (int r = 0; r < n_rows; ++r)
      if (live_[r] && a_.reset && a_.reset[size_t(row0_ + r) * a_.steps + t]) {
        std::memcpy(&s.c[size_t(r) * s.m_stride], &a_.reset_c[(size_t(l) * 2 + d_) * a_.dim], sizeof(float) * a_.dim);
        std::memcpy(&s.h[size_t(r) * s.h_stride], &a_.reset_h[(size_t(l) * 2 + d_) * a_.proj], sizeof(float) * a_.proj);
      }
    const LayerRows* below = l > 0 ? &layers_[l - 1] : nullptr;
    for (int u0 = 0; u0 < dim_p_; u0 += V) {
      // z = bias (+ the first layer's x W_input from the table), then += x W_input + h W_hidden.
      for (int r = 0; r < n_rows; ++r)
        for (int g = 0; g < 4; ++g) z_[r * 4 + g] = load(&w.bias[size_t(g) * dim_p_ + u0]);
      if (l == 0) add_table_gates(u0, n_rows);
      else
        add_gates(&w.input[size_t(u0 / V) * a_.proj * 4 * V], below->y.data(), below->h_stride, n_rows);
      add_gates(&w.hidden[size_t(u0 / V) * a_.proj * 4 * V], s.h.data(), s.h_stride, n_rows);
      for (int r = 0; r < n_rows; ++r) {
        if (!live_[r]) continue;
        const vec* z = &z_[r * 4];
        float* c = &s.c[size_t(r) * s.m_stride + u0];
        const vec c_new = clip(sigmoid(z[2] + 1.0f) * load(c) + sigmoid(z[0]) * tanh_(z[1]), a_.cell_clip);
        store(c, c_new);
        store(&s.m[size_t(r) * s.m_stride + u0], sigmoid(z[3]) * tanh_(c_new));
      }
    }
    if (!w.proj.empty())
      for (int j0 = 0; j0 < proj_p_; j0 += PROJ_COLS)
        for (int r0 = 0; r0 < n_rows; r0 += ROWS)
          proj_block<ROWS, PROJ_VECTORS>(&s.m[size_t(r0) * s.m_stride], s.m_stride, &w.proj[size_t(j0 / PROJ_COLS) * a_.dim * PROJ_COLS],
                                         a_.dim, &s.h_raw[size_t(r0) * s.h_stride + j0], s.h_stride);
    const bool add_input = a_.residual && l > 0;
    const float proj_clip = w.proj.empty() ? 0.0f : a_.proj_clip;
    for (int r = 0; r < n_rows; ++r) {
      if (!live_[r]) continue;
      float* h = &s.h[size_t(r) * s.h_stride];
      float* y = &s.y[size_t(r) * s.h_stride];
      const float* h_new = w.proj.empty() ? &s.m[size_t(r) * s.m_stride] : &s.h_raw[size_t(r) * s.h_stride];
      for (int j = 0; j < a_.proj; ++j) {
        const float v = proj_clip > 0 ? std::min(std::max(h_new[j], -proj_clip), proj_clip) : h_new[j];
        h[j] = v;
        y[j] = add_input ? v + below->y[size_t(r) * below->h_stride + j] : v;
      }
      std::memcpy(&a_.out[(((size_t(l) * 2 + d_) * a_.rows + row0_ + r) * a_.steps + t) * a_.proj], y, sizeof(float) * a_.proj);
    }
  }

  // z += x . panel for rows [0, n_rows): x `[rows, proj]` (stride x_stride), panel: one panel of
  // packed gates. Each group of gates is read by every row block while it is in L1.
  void add_gates(const float* panel, const float* x, int x_stride, int n_rows) {
    for (int g0 = 0; g0 < 4; g0 += GATE_VECTORS)
      for (int r0 = 0; r0 < n_rows; r0 += ROWS)
        gate_block<ROWS, GATE_VECTORS>(&z_[r0 * 4], g0, &x[size_t(r0) * x_stride], x_stride,
                                       panel + size_t(g0) * a_.proj * V, a_.proj);
  }

  // z += the first layer's gates of each row's word, cells [u0, u0 + V).
  void add_table_gates(int u0, int n_rows) {
    const int n = std::min(V, a_.dim - u0);  // the last panel of a dim that is not a multiple of V
    for (int r = 0; r < n_rows; ++r) {
      const float* row = table_rows_[r];
      if (!row) continue;
      if (u0 + PREFETCH_PANELS * V < a_.dim)  // the rows are far apart: fetch them ahead
        for (int g = 0; g < 4; ++g) __builtin_prefetch(row + g * a_.dim + u0 + PREFETCH_PANELS * V, 0, 2);
      for (int g = 0; g < 4; ++g) {
        if (n == V) { z_[r * 4 + g] += load(row + g * a_.dim + u0); continue; }
        float tmp[V] = {};
        std::memcpy(tmp, row + g * a_.dim + u0, sizeof(float) * n);
        z_[r * 4 + g] += load(tmp);
      }
    }
  }

  const LstmStackArgs& a_;
  const std::vector<PackedLayer>& packed_;
  const int d_, row0_, n_rows_, dim_p_, proj_p_, rows_p_, gates_;
  std::vector<char> live_;
  std::vector<const float*> table_rows_;
  std::vector<vec> z_;
  std::vector<LayerRows> layers_;
};

}  // namespace

extern "C" int elmo_lstm_stack(const LstmStackArgs* args) {
  const LstmStackArgs& a = *args;
  const int dim_p = round_up(a.dim, V), proj_p = round_up(a.proj, PROJ_COLS), gates = 4 * a.dim;
  std::vector<PackedLayer> packed[2];
  for (int d = 0; d < 2; ++d)
    for (int l = 0; l < a.n_layers; ++l) {
      PackedLayer p;
      const size_t ld = size_t(l) * 2 + d;
      p.hidden = pack_gates(a.w_hidden + ld * a.proj * gates, a.proj, a.dim, dim_p);
      if (l > 0) p.input = pack_gates(a.w_input + (ld - 2) * a.proj * gates, a.proj, a.dim, dim_p);
      if (a.w_proj) p.proj = pack_proj(a.w_proj + ld * a.dim * a.proj, a.dim, a.proj, proj_p);
      p.bias.assign(size_t(4) * dim_p, 0.0f);
      for (int g = 0; g < 4; ++g)
        std::memcpy(&p.bias[size_t(g) * dim_p], a.bias + ld * gates + g * a.dim, sizeof(float) * a.dim);
      packed[d].push_back(std::move(p));
    }
  // Row blocks per direction: enough tasks for the threads, each at least ROWS rows.
  const int per_direction = std::max(1, std::min(std::max(1, a.n_threads / 2), (a.rows + ROWS - 1) / ROWS));
  const int rows_per_task = round_up((a.rows + per_direction - 1) / per_direction, ROWS);
  std::vector<std::thread> threads;
  for (int d = 0; d < 2; ++d)
    for (int row0 = 0; row0 < a.rows; row0 += rows_per_task) {
      const int n = std::min(rows_per_task, a.rows - row0);
      threads.emplace_back([&a, &packed, d, row0, n] { Task(a, packed[d], d, row0, n).run(); });
    }
  for (auto& t : threads) t.join();
  return 0;
}
