// The biLM's LSTM-with-projection stack over token streams, for inference on CPUs.
//
// Computes what `BiLM.contextualize_from_gates` computes (lstm_recurrence.py has the equations),
// for all layers and all steps in one call. Every (direction, block of rows) is an independent
// task on its own thread: rows and directions never interact, so the tasks share nothing and
// never wait for each other. Per step and layer, a task makes one pass over its direction's
// W_hidden (and W_input above the first layer), packed in panels that hold the i, j, f, o columns
// of the same V cells. A register block computes those four gates of ROWS rows, and the gate
// arithmetic runs while the panel's outputs are still in the cache; then h' = m W_P. The first
// layer's input depends on the word alone, so its x W_input is computed once per distinct word,
// into a table that the steps read.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels.h"

namespace {

using namespace elmo_kernels;

constexpr int GATE_VECTORS = 2;  // gates per register block (of the 4 of a panel): ROWS x 2 accumulators
constexpr int PROJ_VECTORS = 2;  // projection outputs per register block: PROJ_VECTORS x V
constexpr int PROJ_COLS = PROJ_VECTORS * V;
constexpr int PREFETCH_PANELS = 2;  // how far ahead the table rows of the first layer are fetched
constexpr int TABLE_TILE = 32;  // words per tile of the table's matmul (their rows of it are written while in L2)

}  // namespace

extern "C" {

// The weights of a biLM's LSTM stacks, both directions, for `elmo_lstm_model` (mirrored by
// elmo_jax/inference/cpu_kernels/lstm_stack.py). `proj == dim` with `w_proj == nullptr`: no projection (h = m).
// Clips <= 0: none.
struct LstmModelArgs {
  int32_t n_layers, dim, proj, residual;
  float cell_clip, proj_clip;
  const float* bias;        // [L, 2, 4 dim]
  const float* w_input;     // [L, 2, proj, 4 dim]
  const float* w_hidden;    // [L, 2, proj, 4 dim]
  const float* w_proj;      // [L, 2, dim, proj] or nullptr
};

// The arguments of one `elmo_lstm_stack` call (mirrored by elmo_jax/inference/cpu_kernels/lstm_stack.py).
struct LstmStackArgs {
  int32_t rows, steps, words, n_threads;
  const float* embeddings;  // [words, proj]: the token embedding of each word (the first layer's input)
  const int32_t* ids;       // [2, rows, steps]: the word at each position (a row of embeddings)
  const int32_t* lengths;   // [rows]: row r runs steps [0, lengths[r]); its state stays after
  const uint8_t* reset;     // [rows, steps] or nullptr: the state becomes reset_* before the step
  const float* reset_c;     // [L, 2, dim]
  const float* reset_h;     // [L, 2, proj]
  float* c;                 // [L, 2, rows, dim]: the initial states, replaced by the final ones
  float* h;                 // [L, 2, rows, proj]
  float* out;               // [L, 2, rows, steps, proj]: each layer's output (h, + its input
                            // above the first layer with `residual`); positions past a row's
                            // length are left as they are
  float* table;             // elmo_lstm_table_floats(words, dim) floats of scratch space
};

}  // extern "C"

namespace {

// One layer's weights of one direction, packed. hidden, input: [dim_p / V][4 / GATE_VECTORS][proj]
// [GATE_VECTORS][V] (cells zero padded to dim_p): a register block's columns are contiguous;
// proj: [proj_p / PROJ_COLS][dim][PROJ_COLS].
struct PackedLayer {
  std::vector<float> hidden, input, proj, bias;  // bias: [4][dim_p]
};

// A biLM's LSTM stacks with their weights packed once (`elmo_lstm_model`), for every call.
struct Model {
  int n_layers, dim, proj, dim_p, proj_p;
  bool residual;
  float cell_clip, proj_clip;
  std::vector<PackedLayer> layers[2];  // per direction

  explicit Model(const LstmModelArgs& a)
      : n_layers(a.n_layers), dim(a.dim), proj(a.proj), dim_p(round_up(a.dim, V)),
        proj_p(round_up(a.proj, PROJ_COLS)), residual(a.residual), cell_clip(a.cell_clip), proj_clip(a.proj_clip) {
    const int gates = 4 * dim;
    for (int d = 0; d < 2; ++d)
      for (int l = 0; l < n_layers; ++l) {
        PackedLayer p;
        const size_t ld = size_t(l) * 2 + d;
        p.hidden = pack_gates<GATE_VECTORS>(a.w_hidden + ld * proj * gates, proj, 4, dim, dim_p);
        p.input = pack_gates<GATE_VECTORS>(a.w_input + ld * proj * gates, proj, 4, dim, dim_p);
        if (a.w_proj) p.proj = pack_panels<PROJ_COLS>(a.w_proj + ld * dim * proj, dim, proj, proj_p);
        p.bias = pad_gates(a.bias + ld * gates, 4, dim, dim_p);
        layers[d].push_back(std::move(p));
      }
  }
};

// z[r] += x[r] . panel for rows [0, n_rows), all 4 gates of one panel of V cells: x packed
// `[rows, k]`, panel `[4 / GATE_VECTORS][k][GATE_VECTORS][V]`, z `[rows][4]` vectors.
inline void add_panel_gates(vec* z, const Packed& x, const float* panel, int n_rows) {
  for (int g0 = 0; g0 < 4; g0 += GATE_VECTORS)
    add_panel<GATE_VECTORS>(z + g0, 4, x, panel + size_t(g0) * x.k_size * V, n_rows, x.k_size);
}

// The state and scratch of one layer for a task's rows.
struct LayerRows {
  int rows_p;
  std::vector<float> c;          // [dim_p / V][rows_p][V]: a panel's cells of all rows together
  std::vector<float> h_raw;      // h' = m W_P, rows of proj_p
  Packed m, h, y;                // m = sigmoid(o) tanh(c); h; y, the layer's output at this step
  LayerRows(int rows_p, int dim_p, int proj_p, int proj)
      : rows_p(rows_p), c(size_t(rows_p) * dim_p), h_raw(size_t(rows_p) * proj_p),
        m(rows_p, dim_p), h(rows_p, proj), y(rows_p, proj) {}
  float* cells(int r, int u0) { return &c[(size_t(u0 / V) * rows_p + r) * V]; }  // u0: a multiple of V
  float& cell(int r, int u) { return cells(r, u - u % V)[u % V]; }
  void set_cells(int r, const float* row, int dim) { for (int u = 0; u < dim; ++u) cell(r, u) = row[u]; }
};

class Task {
 public:
  // table: the first layer's x W_input of each word in direction d (`input_gate_table`).
  Task(const Model& model, const LstmStackArgs& a, const float* table, int d, int row0, int n_rows)
      : m_(model), a_(a), packed_(model.layers[d]), table_(table), d_(d), row0_(row0), n_rows_(n_rows),
        rows_p_(round_up(n_rows, ROWS)), live_(rows_p_, 0), table_rows_(rows_p_), z_(size_t(rows_p_) * 4) {
    for (int l = 0; l < m_.n_layers; ++l) layers_.emplace_back(rows_p_, m_.dim_p, m_.proj_p, m_.proj);
  }

  void run() {
    for (int l = 0; l < m_.n_layers; ++l)
      for (int r = 0; r < n_rows_; ++r) {
        layers_[l].set_cells(r, &a_.c[state_row(l, r) * m_.dim], m_.dim);
        layers_[l].h.set_row(r, &a_.h[state_row(l, r) * m_.proj], m_.proj);
      }
    for (int t = 0; t < a_.steps; ++t) {
      int live_rows = 0;  // rows [0, live_rows) hold every row that runs this step
      for (int r = 0; r < rows_p_; ++r) {
        const int row = row0_ + r;
        live_[r] = r < n_rows_ && t < a_.lengths[row];
        if (live_[r]) live_rows = r + 1;
        const size_t word = live_[r] ? a_.ids[(size_t(d_) * a_.rows + row) * a_.steps + t] : 0;
        table_rows_[r] = live_[r] ? table_ + word * 4 * m_.dim_p : nullptr;
      }
      if (live_rows == 0) continue;
      const int blocks = round_up(live_rows, ROWS);
      for (int l = 0; l < m_.n_layers; ++l) step_layer(l, t, blocks);
    }
    for (int l = 0; l < m_.n_layers; ++l)
      for (int r = 0; r < n_rows_; ++r) {
        for (int u = 0; u < m_.dim; ++u) a_.c[state_row(l, r) * m_.dim + u] = layers_[l].cell(r, u);
        for (int j = 0; j < m_.proj; ++j) a_.h[state_row(l, r) * m_.proj + j] = layers_[l].h.at(r, j);
      }
  }

 private:
  size_t state_row(int l, int r) const { return (size_t(l) * 2 + d_) * a_.rows + row0_ + r; }

  // Layer l at step t for rows [0, n_rows) (a multiple of ROWS).
  void step_layer(int l, int t, int n_rows) {
    LayerRows& s = layers_[l];
    const PackedLayer& w = packed_[l];
    const int dim_p = m_.dim_p, proj = m_.proj;
    for (int r = 0; r < n_rows; ++r)
      if (live_[r] && a_.reset && a_.reset[size_t(row0_ + r) * a_.steps + t]) {
        s.set_cells(r, &a_.reset_c[(size_t(l) * 2 + d_) * m_.dim], m_.dim);
        s.h.set_row(r, &a_.reset_h[(size_t(l) * 2 + d_) * proj], proj);
      }
    const LayerRows* below = l > 0 ? &layers_[l - 1] : nullptr;
    for (int u0 = 0; u0 < dim_p; u0 += V) {
      // z = bias (+ the first layer's x W_input from the table), then += x W_input + h W_hidden.
      for (int r = 0; r < n_rows; ++r)
        for (int g = 0; g < 4; ++g) z_[r * 4 + g] = load(&w.bias[size_t(g) * dim_p + u0]);
      if (l == 0) add_table_gates(u0, n_rows);
      else
        add_panel_gates(z_.data(), below->y, &w.input[size_t(u0 / V) * proj * 4 * V], n_rows);
      add_panel_gates(z_.data(), s.h, &w.hidden[size_t(u0 / V) * proj * 4 * V], n_rows);
      for (int r = 0; r < n_rows; ++r) {
        if (!live_[r]) continue;
        const vec* z = &z_[r * 4];
        float* c = s.cells(r, u0);
        const vec c_new = clip(sigmoid(z[2] + 1.0f) * load(c) + sigmoid(z[0]) * tanh_(z[1]), m_.cell_clip);
        store(c, c_new);
        float m[V];
        store(m, sigmoid(z[3]) * tanh_(c_new));
        for (int l = 0; l < V; ++l) s.m.at(r, u0 + l) = m[l];
      }
    }
    if (!w.proj.empty())  // h' = m W_P: ROWS rows x PROJ_COLS outputs at a time
      for (int j0 = 0; j0 < m_.proj_p; j0 += PROJ_COLS)
        for (int r0 = 0; r0 < n_rows; r0 += ROWS) {
          vec acc[ROWS][PROJ_VECTORS] = {};
          accumulate(acc, s.m.block(r0), &w.proj[size_t(j0 / PROJ_COLS) * m_.dim * PROJ_COLS], m_.dim);
#pragma GCC unroll 8
          for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 4
            for (int q = 0; q < PROJ_VECTORS; ++q) store(&s.h_raw[size_t(r0 + r) * m_.proj_p + j0 + q * V], acc[r][q]);
        }
    const bool add_input = m_.residual && l > 0;
    const float proj_clip = w.proj.empty() ? 0.0f : m_.proj_clip;
    for (int r = 0; r < n_rows; ++r) {
      if (!live_[r]) continue;
      const float* h_raw = &s.h_raw[size_t(r) * m_.proj_p];
      float* out = &a_.out[(((size_t(l) * 2 + d_) * a_.rows + row0_ + r) * a_.steps + t) * proj];
      for (int j = 0; j < proj; ++j) {
        const float h_new = w.proj.empty() ? s.m.at(r, j) : h_raw[j];
        const float h = proj_clip > 0 ? std::min(std::max(h_new, -proj_clip), proj_clip) : h_new;
        s.h.at(r, j) = h;
        out[j] = s.y.at(r, j) = add_input ? h + below->y.at(r, j) : h;
      }
    }
  }

  // z += the first layer's gates of each row's word, cells [u0, u0 + V).
  void add_table_gates(int u0, int n_rows) {
    const size_t panel = size_t(u0 / V) * 4 * V;
    for (int r = 0; r < n_rows; ++r) {
      const float* row = table_rows_[r];
      if (!row) continue;
      if (u0 + PREFETCH_PANELS * V < m_.dim_p)  // the rows' words are far apart: fetch them ahead
        for (int g = 0; g < 4; ++g) __builtin_prefetch(row + panel + (PREFETCH_PANELS * 4 + g) * V, 0, 2);
      for (int g = 0; g < 4; ++g) z_[r * 4 + g] += load(row + panel + g * V);
    }
  }

  const Model& m_;
  const LstmStackArgs& a_;
  const std::vector<PackedLayer>& packed_;
  const float* table_;
  const int d_, row0_, n_rows_, rows_p_;
  std::vector<char> live_;
  std::vector<const float*> table_rows_;
  std::vector<vec> z_;
  std::vector<LayerRows> layers_;
};

// The first layer's x W_input of words [w0, w1) in one direction (first: its packed first layer),
// in panels like the weights': table[w][u / V][g][u % V] = embeddings[w] . W_input[:, g dim + u]
// (words x dim_p / V panels x 4 x V), so that a step reads a word's panel as 4 vectors in a row
// and a row's word from one end to the other over the panels (a few pages, not one per panel).
// Tiles of TABLE_TILE words, every panel of W_input per tile.
void input_gate_table(const Model& model, const LstmStackArgs& a, const PackedLayer& first, int w0, int w1,
                      float* table) {
  Packed x(TABLE_TILE, model.proj);
  std::vector<vec> z(size_t(TABLE_TILE) * 4);
  for (int t0 = w0; t0 < w1; t0 += TABLE_TILE) {
    const int n = std::min(TABLE_TILE, w1 - t0), rows_p = round_up(n, ROWS);
    std::fill(x.data.begin(), x.data.end(), 0.0f);
    for (int r = 0; r < n; ++r) x.set_row(r, a.embeddings + size_t(t0 + r) * model.proj, model.proj);
    for (int u0 = 0; u0 < model.dim_p; u0 += V) {
      std::fill(z.begin(), z.begin() + size_t(rows_p) * 4, vec{});
      add_panel_gates(z.data(), x, &first.input[size_t(u0 / V) * model.proj * 4 * V], rows_p);
      float* out = table + (size_t(t0) * model.dim_p + u0) * 4;
      for (int r = 0; r < n; ++r)
        for (int g = 0; g < 4; ++g) store(out + size_t(r) * model.dim_p * 4 + g * V, z[r * 4 + g]);
    }
  }
}

}  // namespace

// The model's weights packed for the kernel: a handle for `elmo_lstm_stack`, freed by `elmo_lstm_free`.
extern "C" void* elmo_lstm_model(const LstmModelArgs* args) { return new Model(*args); }

extern "C" void elmo_lstm_free(void* model) { delete static_cast<Model*>(model); }

// Runs the model's stacks (`elmo_lstm_model`) over the streams of `args`.
extern "C" int elmo_lstm_stack(const void* handle, const LstmStackArgs* args) {
  const Model& model = *static_cast<const Model*>(handle);
  const LstmStackArgs& a = *args;
  // The first layer's gates of every word, then the steps: each a task per (direction, block).
  const size_t table_floats = size_t(4) * model.dim_p * a.words;  // per direction
  parallel_ranges(2, a.words, a.n_threads, ROWS, [&](int d, int begin, int end) {
    input_gate_table(model, a, model.layers[d][0], begin, end, a.table + d * table_floats);
  });
  parallel_ranges(2, a.rows, a.n_threads, ROWS, [&](int d, int begin, int end) {
    Task(model, a, a.table + d * table_floats, d, begin, end - begin).run();
  });
  return 0;
}

// The scratch floats `LstmStackArgs::table` needs for `words` words of `dim` cells.
extern "C" int64_t elmo_lstm_table_floats(int32_t words, int32_t dim) {
  return int64_t(2) * 4 * round_up(dim, V) * words;
}
