// The char CNN token encoder (character embeddings, convolutions with a max over positions, an
// activation, highway layers, a projection), for inference on CPUs.
//
// Computes what `CharCNNEncoder` computes for float32 biLMs, for a batch of words in one call.
// The words are split over threads; a thread encodes TILE words at a time, all layers, in memory
// of its own. A convolution is a matmul of the words' character windows (unfolded into the
// register blocks' packed layout) by the filters, and each register block's outputs are folded
// into their word's max at once, so no [windows, filters] output is ever stored. Only the windows
// that touch a word are computed: every window wholly in the padding after a word gives the same
// output, computed once per model. Highway layers and the projection are register-blocked matmuls
// whose gate arithmetic runs on each panel of outputs while it is in the registers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels.h"

namespace {

using namespace elmo_kernels;

constexpr int COLS = 2 * V;  // filters or outputs of a register block: ROWS x 2 accumulators
constexpr int TILE = 64;     // words a thread encodes together
constexpr int K_CHUNK = 128; // k per pass of a highway or projection panel: 16 KiB of it, in L1

}  // namespace

extern "C" {

// The weights of a char CNN, for `elmo_char_cnn_model` (mirrored by elmo_jax/inference/cpu_kernels/char_cnn.py).
// F = the sum of `channels`.
struct CharCnnModelArgs {
  int32_t n_widths, embed_dim, n_highway, out_dim, n_char_ids, pad_id, relu;
  const int32_t* widths;     // [n_widths]
  const int32_t* channels;   // [n_widths]
  const float* char_embed;   // [n_char_ids, embed_dim]
  const float* w_cnn;        // each width's [width, embed_dim, channels], one after another
  const float* b_cnn;        // [F]
  const float* w_highway;    // [n_highway, F, 2 F]: each layer's W_carry and W_transform side by side
  const float* b_highway;    // [n_highway, 2 F]: b_carry and b_transform
  const float* w_proj;       // [F, out_dim]
  const float* b_proj;       // [out_dim]
};

// The arguments of one `elmo_char_cnn` call (mirrored by elmo_jax/inference/cpu_kernels/char_cnn.py).
struct CharCnnArgs {
  int32_t words, max_chars, n_threads;
  const int32_t* char_ids;  // [words, max_chars]: ids < n_char_ids, pad_id after each word
  float* out;               // [words, out_dim]
};

}  // extern "C"

namespace {

// One convolution: `width` characters of `embed_dim` -> `channels` filters, the model's outputs
// [offset, offset + channels).
struct Conv {
  int width, channels, offset;
  std::vector<float> w;        // [channels_p / COLS][width * embed_dim][COLS]
  std::vector<float> padding;  // [channels]: the output of a window of padding only
};

struct CharCnn {
  int embed_dim, n_filters, f_p, pooled_stride, out_dim, out_p, pad_id;
  bool relu;
  std::vector<float> embed, b_cnn, proj, b_proj;  // b_proj: [out_p]
  std::vector<Conv> convs;
  // Per layer: the carry and transform gates of each panel of V outputs (`pack_gates`), and their
  // biases `[2][f_p]`.
  std::vector<std::vector<float>> highway, b_highway;

  explicit CharCnn(const CharCnnModelArgs& a)
      : embed_dim(a.embed_dim), n_filters(0), pooled_stride(0), out_dim(a.out_dim), out_p(round_up(a.out_dim, COLS)),
        pad_id(a.pad_id), relu(a.relu),
        embed(a.char_embed, a.char_embed + size_t(a.n_char_ids) * a.embed_dim) {
    const float* w = a.w_cnn;
    for (int i = 0; i < a.n_widths; ++i) {
      Conv conv{a.widths[i], a.channels[i], n_filters, {}, std::vector<float>(a.channels[i], 0.0f)};
      const int k_size = conv.width * embed_dim;
      conv.w = pack_panels<COLS>(w, k_size, conv.channels, round_up(conv.channels, COLS));
      for (int c = 0; c < conv.channels; ++c) {
        double sum = 0.0;
        for (int k = 0; k < k_size; ++k) sum += double(embed[size_t(pad_id) * embed_dim + k % embed_dim]) * w[size_t(k) * conv.channels + c];
        conv.padding[c] = float(sum);
      }
      w += size_t(k_size) * conv.channels;
      n_filters += conv.channels;
      pooled_stride = std::max(pooled_stride, round_up(conv.channels, COLS));
      convs.push_back(std::move(conv));
    }
    f_p = round_up(n_filters, V);
    b_cnn.assign(a.b_cnn, a.b_cnn + n_filters);
    for (int l = 0; l < a.n_highway; ++l) {
      highway.push_back(pack_gates<2>(a.w_highway + size_t(l) * n_filters * 2 * n_filters, n_filters, 2, n_filters, f_p));
      b_highway.push_back(pad_gates(a.b_highway + size_t(l) * 2 * n_filters, 2, n_filters, f_p));
    }
    proj = pack_panels<COLS>(a.w_proj, n_filters, out_dim, out_p);
    b_proj = pad_gates(a.b_proj, 1, out_dim, out_p);
  }
};

// Encodes words [begin, end) of a call, TILE at a time, with scratch of its own.
class Encoder {
 public:
  Encoder(const CharCnn& model, const CharCnnArgs& a)
      : m_(model), a_(a), h_(TILE, model.n_filters), next_(TILE, model.n_filters),
        pooled_(size_t(TILE + 1) * model.pooled_stride), windows_(0, 0) {}

  void run(int begin, int end) {
    for (int t0 = begin; t0 < end; t0 += TILE) encode_tile(t0, std::min(TILE, end - t0));
  }

 private:
  void encode_tile(int t0, int n) {
    int lengths[TILE];  // characters up to the last that is not padding
    for (int t = 0; t < n; ++t) {
      const int32_t* ids = a_.char_ids + size_t(t0 + t) * a_.max_chars;
      int length = a_.max_chars;
      while (length > 0 && ids[length - 1] == m_.pad_id) --length;
      lengths[t] = length;
    }
    std::fill(h_.data.begin(), h_.data.end(), 0.0f);
    for (const Conv& conv : m_.convs) convolve(conv, t0, n, lengths);
    for (size_t l = 0; l < m_.highway.size(); ++l) {
      highway(m_.highway[l], m_.b_highway[l], n);
      std::swap(h_, next_);
    }
    project(t0, n);
  }

  // h[:, conv.offset + c] = act(b + max over windows of the window . filter c), for each word.
  void convolve(const Conv& conv, int t0, int n, const int* lengths) {
    const int d = m_.embed_dim, k_size = conv.width * d, positions = a_.max_chars - conv.width + 1;
    row_word_.clear();
    row_position_.clear();
    for (int t = 0; t < n; ++t)
      for (int p = 0; p < std::min(lengths[t], positions); ++p) row_word_.push_back(t), row_position_.push_back(p);
    const int rows = int(row_word_.size()), rows_p = round_up(rows, ROWS);
    row_word_.resize(rows_p, TILE);  // padding rows fold into the spare word
    windows_.k_size = k_size;
    windows_.data.assign(size_t(rows_p) * k_size, 0.0f);
    for (int r = 0; r < rows; ++r) {
      const int32_t* ids = a_.char_ids + size_t(t0 + row_word_[r]) * a_.max_chars + row_position_[r];
      for (int j = 0; j < conv.width; ++j)
        for (int e = 0; e < d; ++e) windows_.at(r, j * d + e) = m_.embed[size_t(ids[j]) * d + e];
    }
    const int channels_p = round_up(conv.channels, COLS);
    const float lowest = -std::numeric_limits<float>::infinity();
    for (int t = 0; t <= TILE; ++t) {  // a word with a window of padding only starts from its output
      float* max = &pooled_[size_t(t) * m_.pooled_stride];
      const bool padded = t < n && lengths[t] + conv.width <= a_.max_chars;
      for (int c = 0; c < channels_p; ++c) max[c] = padded && c < conv.channels ? conv.padding[c] : lowest;
    }
    for (int c0 = 0; c0 < channels_p; c0 += COLS) {
      const float* panel = &conv.w[size_t(c0 / COLS) * k_size * COLS];
      for (int r0 = 0; r0 < rows_p; r0 += ROWS) {
        vec acc[ROWS][2] = {};
        accumulate(acc, windows_.block(r0), panel, k_size);
        for (int r = 0; r < ROWS; ++r) {
          float* max = &pooled_[size_t(row_word_[r0 + r]) * m_.pooled_stride + c0];
          for (int q = 0; q < 2; ++q) store(max + q * V, vmax(load(max + q * V), acc[r][q]));
        }
      }
    }
    for (int t = 0; t < n; ++t)
      for (int c = 0; c < conv.channels; ++c) {
        const float x = pooled_[size_t(t) * m_.pooled_stride + c] + m_.b_cnn[conv.offset + c];
        h_.at(t, conv.offset + c) = m_.relu ? std::max(x, 0.0f) : std::tanh(x);
      }
  }

  // next = g relu(h W_t + b_t) + (1 - g) h, g = sigmoid(h W_c + b_c).
  void highway(const std::vector<float>& w, const std::vector<float>& bias, int n) {
    const int f = m_.n_filters, rows_p = round_up(n, ROWS);
    for (int u0 = 0; u0 < m_.f_p; u0 += V) {
      const vec b_carry = load(&bias[u0]), b_transform = load(&bias[m_.f_p + u0]);
      for (int r = 0; r < rows_p; ++r) z_[r * 2] = b_carry, z_[r * 2 + 1] = b_transform;
      add_panel<2>(z_, 2, h_, &w[size_t(u0 / V) * f * 2 * V], rows_p, K_CHUNK);
      for (int r = 0; r < rows_p; ++r) {
        float x[V], out[V];
        for (int l = 0; l < V; ++l) x[l] = u0 + l < f ? h_.at(r, u0 + l) : 0.0f;
        const vec gate = sigmoid(z_[r * 2]);
        store(out, gate * vmax(z_[r * 2 + 1], splat(0.0f)) + (1.0f - gate) * load(x));
        for (int l = 0; l < V && u0 + l < f; ++l) next_.at(r, u0 + l) = out[l];
      }
    }
  }

  // out[t0 + t] = h[t] W_proj + b_proj.
  void project(int t0, int n) {
    const int rows_p = round_up(n, ROWS);
    for (int j0 = 0; j0 < m_.out_p; j0 += COLS) {
      for (int r = 0; r < rows_p; ++r)
        for (int q = 0; q < 2; ++q) z_[r * 2 + q] = load(&m_.b_proj[j0 + q * V]);
      add_panel<2>(z_, 2, h_, &m_.proj[size_t(j0 / COLS) * m_.n_filters * COLS], rows_p, K_CHUNK);
      const int cols = std::min(COLS, m_.out_dim - j0);
      for (int r = 0; r < n; ++r) {
        float row[COLS];
        for (int q = 0; q < 2; ++q) store(row + q * V, z_[r * 2 + q]);
        std::memcpy(a_.out + size_t(t0 + r) * m_.out_dim + j0, row, sizeof(float) * cols);
      }
    }
  }

  const CharCnn& m_;
  const CharCnnArgs& a_;
  Packed h_, next_;            // [TILE, F]: the filters' outputs, then each highway layer's
  std::vector<float> pooled_;  // [TILE + 1][pooled_stride]: a convolution's running max of each word (+ a spare)
  Packed windows_;             // [rows, width * embed_dim]: the character windows of a convolution
  std::vector<int> row_word_, row_position_;  // the word of each window and its first character
  vec z_[TILE * 2];            // a panel's outputs: 2 vectors per word
};

}  // namespace

// The char CNN's weights packed for the kernel: a handle for `elmo_char_cnn`, freed by `elmo_char_cnn_free`.
extern "C" void* elmo_char_cnn_model(const CharCnnModelArgs* args) { return new CharCnn(*args); }

extern "C" void elmo_char_cnn_free(void* model) { delete static_cast<CharCnn*>(model); }

// Token embeddings of `args->words` words (`elmo_char_cnn_model`'s model).
extern "C" int elmo_char_cnn(const void* handle, const CharCnnArgs* args) {
  const CharCnn& model = *static_cast<const CharCnn*>(handle);
  parallel_ranges(1, args->words, args->n_threads, TILE, [&](int, int begin, int end) { Encoder(model, *args).run(begin, end); });
  return 0;
}
