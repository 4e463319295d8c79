"""A fast PyTorch (float32, CPU or CUDA) ELMo forward pass for inference, to measure elmo-jax's embedding API against.

  elmo = TorchElmo.from_files("options.json", "weights.hdf5")  # device="cuda" to compute on a GPU
  for layers in elmo.embed_sentences(sentences, batch_size=32):  # [n_layers + 1, n_tokens, 2 P] each
      ...

Benchmark-only: needs `pip install torch` (not a dependency of elmo-jax); benchmarks/embed_throughput.py
runs it side by side with `elmo_jax.inference.embedder` and checks that both agree (`--check`). It reads the
bilm-tf/AllenNLP files (options.json + hdf5) by dataset name and computes what bilm-tf's
`BidirectionalLanguageModel` and AllenNLP's `Elmo` compute, written from their equations (as
tests/reference/bilm_numpy.py states them), not from elmo-jax's code:
  chars:   bilm-tf ids (UTF-8 bytes[:max_chars - 2], 256 <S>, 257 </S>, 258 begin-, 259 end-of-word,
           260 pad) index the file's 261-row `char_embed` directly (bilm-tf shifts them by +1 into a
           table with a zero row prepended: the same rows);
  CNN:     per filter, max over positions of the valid convolution, + bias, activation; concat;
  highway: t = sigmoid(x Wc + bc); x = t relu(x Wt + bt) + (1 - t) x;  proj: x Wp + bp (if stored);
  LSTM:    z = x W_in + h W_h + B (gates i, j, f, o); c = sigmoid(f + 1) c + sigmoid(i) tanh(j),
           clip c; h = (sigmoid(o) tanh(c)) W_P_0, clip h (no W_P_0 when projection_dim == dim:
           then no projection and no proj clip); layers >= 1 add their input (skip connections);
  output:  `<S> w1 .. wn </S>` forward and reversed backward; layer 0 = [x; x], layer j =
           [forward_j; backward_j] at w1 .. wn. An empty sentence gives `[n_layers + 1, 0, 2 P]`.
Stateless: every batch starts from zero LSTM states (elmo-jax's `ElmoEmbedder(stateful=False)`).
`device`: where the weights live and everything from the char embedding on is computed; the
words, character ids and packing index maps are made on the host and sent there per batch, and
the layers come back as host NumPy arrays (on CUDA that copy waits for the batch's work, so a
returned batch is finished work).

What makes it fast (eager PyTorch, no compilation):
  * token embeddings depend on the word alone: with `token_cache` (default) each distinct word
    goes through the char CNN once and its embedding is kept (unbounded) for later batches (elmo-jax's
    embedder does the same); `cache_vocabulary` precomputes a vocabulary (AllenNLP's
    `vocab_to_cache`); without either, the char CNN runs on every real token;
  * the char CNN runs over the first `longest word + widest filter` characters only: every window
    wholly in the padding after a word gives the same value, so the max over positions is unchanged;
  * packed sequences: a batch's sentences are sorted by length and their tokens packed time-major,
    so nothing runs on padding: time step t of the LSTM runs on the rows still inside their
    sentence (a prefix of the sorted rows), with no masking;
  * the input half of each LSTM layer's matmul is hoisted out of the time loop (one
    `[2, N, P] x [2, P, 4D]` bmm for all steps, bias and forget bias folded in); the loop does
    `h W_h` (skipped at t = 0, where h = 0) and the cell in place on slices of that buffer, both
    directions in every bmm, the gate columns reordered to (i, f, o, j) so one sigmoid and one
    tanh cover the gates; the projection writes straight into the layer's output;
  * char CNN: one matmul per filter over unfolded windows (`conv="unfold"`) or oneDNN's
    `F.conv1d` (`conv="conv1d"`), bias and activation after the max over positions;
    highway carry and transform in one GEMM;
  * `torch.inference_mode`, `torch.set_num_threads(os.cpu_count())` (embed_throughput.py).
There is no fused kernel for an LSTM with projection and clipping (`torch.nn.LSTM(proj_size=)`
has no clipping and another gate order), so the hand-written loop is the honest equivalent.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Iterable, Iterator, Mapping, Sequence

import h5py
import numpy as np
import torch
import torch.nn.functional as F

BOS, EOS, BOW, EOW, PAD = 256, 257, 258, 259, 260  # bilm-tf's reserved character ids.


def token_char_ids(word: str, max_chars: int) -> np.ndarray:
    """bilm-tf's (unshifted) character ids of one token, `[max_chars]` int64."""
    ids = np.full(max_chars, PAD, np.int64)
    ids[0] = BOW
    if word in ("<S>", "</S>"):
        ids[1], ids[2] = (BOS if word == "<S>" else EOS), EOW
        return ids
    data = word.encode("utf-8", "ignore")[: max_chars - 2]  # Over-long tokens are truncated.
    ids[1 : 1 + len(data)] = np.frombuffer(data, np.uint8)
    ids[1 + len(data)] = EOW
    return ids


class CharIds:
    """Memoised `token_char_ids` (text repeats words; encoding each occurrence is slow)."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, words: Sequence[str]) -> torch.Tensor:
        """`[len(words), max_chars]` int64."""
        rows = []
        for word in words:
            ids = self._cache.get(word)
            if ids is None:
                ids = self._cache[word] = token_char_ids(word, self.max_chars)
            rows.append(ids)
        return torch.from_numpy(np.stack(rows))


def read_bilm_files(options_path: str, weights_path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(options, every dataset of the hdf5 file by name)."""
    with open(options_path, encoding="utf-8") as f:
        options = json.load(f)
    weights: dict[str, np.ndarray] = {}

    def read(name: str, obj: h5py.HLObject) -> None:
        if isinstance(obj, h5py.Dataset):
            weights[name] = obj[...]

    with h5py.File(weights_path, "r") as f:
        f.visititems(read)
    return options, weights


def _tensor(weights: Mapping[str, np.ndarray], name: str, device: str | torch.device = "cpu") -> torch.Tensor:
    """The dataset `name` as a float32 tensor on `device` (on the CPU it shares the array's memory)."""
    return torch.from_numpy(np.asarray(weights[name], np.float32)).to(device)


class Packing:
    """Index maps of one batch packed time-major after sorting its sentences by length (longest first).

    Sorted row r at time step t (t < its length) sits at packed position `offsets[t] + r`, so step t
    reads the contiguous rows `offsets[t] : offsets[t] + batch_sizes[t]`.
      words           the forward sequence's tokens (`<S>` w1 .. wn `</S>`) in packed order, `[N]`
      backward        packed position of the token the backward LM reads there, `[N]` (x_b = x_f[backward])
      out_f, out_b    packed positions of w1 .. wn of every sentence (sorted order) in the forward
                      and backward sequences, `[M]` (M real tokens)
      order, counts   sentence index of each sorted row, and its token count n
    The index tensors are on `device` (they index tensors there); the lists stay on the host.
    """

    def __init__(self, sentences: Sequence[Sequence[str]], device: str | torch.device = "cpu"):
        nonempty = [i for i, s in enumerate(sentences) if s]
        self.order = sorted(nonempty, key=lambda i: -len(sentences[i]))  # Stable: ties keep their order.
        self.counts = [len(sentences[i]) for i in self.order]
        lengths = np.array(self.counts, np.int64) + 2
        steps = int(lengths[0]) if len(lengths) else 0
        self.batch_sizes = [int(k) for k in (lengths[None, :] > np.arange(steps)[:, None]).sum(axis=1)]
        self.offsets = np.concatenate([[0], np.cumsum(self.batch_sizes)]).astype(np.int64)
        words = np.empty(int(self.offsets[-1]), object)
        backward, out_f, out_b = np.empty(len(words), np.int64), [], []
        for r, (i, length) in enumerate(zip(self.order, lengths)):
            positions = self.offsets[:length] + r
            words[positions] = ["<S>", *sentences[i], "</S>"]
            backward[positions] = positions[::-1]  # Backward step t reads forward position length-1-t.
            out_f.append(positions[1:-1])
            out_b.append(positions[-2:0:-1])  # w_k is backward step length-1-k.
        self.words: list[str] = words.tolist()
        self.backward = torch.from_numpy(backward).to(device)
        self.out_f = torch.from_numpy(np.concatenate(out_f or [np.zeros(0, np.int64)])).to(device)
        self.out_b = torch.from_numpy(np.concatenate(out_b or [np.zeros(0, np.int64)])).to(device)


class TorchElmo:
    """ELMo representations from bilm-tf/AllenNLP weights, in PyTorch (stateless per batch), computed on
    `device` ("cpu", "cuda", "cuda:1", ...)."""

    def __init__(
        self, options: dict, weights: Mapping[str, np.ndarray], conv: str = "unfold", token_cache: bool = True,
        device: str | torch.device = "cpu",
    ):
        if conv not in ("unfold", "conv1d"):
            raise ValueError(f"conv must be 'unfold' or 'conv1d', got {conv!r}")
        self.device = torch.device(device)
        t = functools.partial(_tensor, weights, device=self.device)
        cnn, lstm = options["char_cnn"], options["lstm"]
        self.conv, self.token_cache = conv, token_cache
        self.chars = CharIds(cnn["max_characters_per_token"])
        self.char_embed = t("char_embed")  # [261, d]
        self.activation = {"relu": torch.relu, "tanh": torch.tanh}[cnn["activation"]]
        # Filter i: [w, d, n] -> [d * w, n] (unfold's window order), or [n, d, w] (conv1d's).
        kernels = [t(f"CNN/W_cnn_{i}")[0] for i in range(len(cnn["filters"]))]
        self.kernels = [k.permute(1, 0, 2).reshape(-1, k.shape[2]).contiguous() if conv == "unfold"
                        else k.permute(2, 1, 0).contiguous() for k in kernels]
        self.widths = [int(k.shape[0]) for k in kernels]
        self.conv_bias = torch.cat([t(f"CNN/b_cnn_{i}") for i in range(len(kernels))])
        self.highway = [  # ([F, 2F] carry | transform, [2F])
            (torch.cat([t(f"CNN_high_{k}/W_carry"), t(f"CNN_high_{k}/W_transform")], 1),
             torch.cat([t(f"CNN_high_{k}/b_carry"), t(f"CNN_high_{k}/b_transform")]))
            for k in range(cnn.get("n_highway") or 0)
        ]
        self.proj = (t("CNN_proj/W_proj"), t("CNN_proj/b_proj")) if "CNN_proj/W_proj" in weights else None
        self.dim, self.proj_dim, self.n_layers = lstm["dim"], lstm["projection_dim"], lstm.get("n_layers", 1)
        self.cell_clip, self.proj_clip = lstm.get("cell_clip") or 0.0, lstm.get("proj_clip") or 0.0
        self.skip = lstm["use_skip_connections"]
        self.layers = [self._lstm_weights(weights, layer) for layer in range(self.n_layers)]
        self._index: dict[str, int] = {}  # Held word -> its row of `_table`.
        self._table = torch.zeros(0, self.proj_dim, device=self.device)  # [capacity, P]; the first len(_index) held.

    @classmethod
    def from_files(cls, options_path: str, weights_path: str, **kwargs) -> "TorchElmo":
        return cls(*read_bilm_files(options_path, weights_path), **kwargs)

    def _lstm_weights(self, weights: Mapping[str, np.ndarray], layer: int) -> tuple:
        """Both directions stacked, on the device: W_in `[2, P, 4D]`, W_h `[2, P, 4D]`, bias `[2, 4D]`
        (+1 on f), W_P `[2, D, P]` or None; gate columns reordered from (i, j, f, o) to (i, f, o, j)."""
        d = self.dim
        t = functools.partial(_tensor, weights, device=self.device)
        perm = torch.cat([torch.arange(0, d), torch.arange(2 * d, 4 * d), torch.arange(d, 2 * d)]).to(self.device)
        roots = [f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/" for direction in (0, 1)]
        w0 = torch.stack([t(r + "W_0") for r in roots])[..., perm]
        bias = torch.stack([t(r + "B") for r in roots])[..., perm]
        bias[:, d : 2 * d] += 1.0  # The forget gate's bias (TF's LSTMCell adds it at run time).
        p_in = w0.shape[1] - self.proj_dim
        projected = roots[0] + "W_P_0" in weights
        w_p = torch.stack([t(r + "W_P_0") for r in roots]) if projected else None
        return w0[:, :p_in].contiguous(), w0[:, p_in:].contiguous(), bias, w_p

    # ------------------------------------------------------------------------------ token encoder

    def _encode(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char ids `[N, C]` on the host -> token embeddings `[N, P]` on the device (the longest word
        is measured on the host: no wait for the device)."""
        longest = int((char_ids != PAD).sum(dim=1).max()) if len(char_ids) else 0
        char_ids = char_ids[:, : longest + max(self.widths)].to(self.device)
        x = F.embedding(char_ids, self.char_embed)  # [N, C', d]
        if self.conv == "conv1d":
            xc = x.transpose(1, 2).contiguous()  # [N, d, C']
            pooled = [F.conv1d(xc, k).amax(dim=2) for k in self.kernels]
        else:  # Windows [N, C' - w + 1, d * w] @ [d * w, n].
            windows = (x.unfold(1, w, 1).flatten(2) for w in self.widths)
            pooled = [torch.matmul(xw, k).amax(dim=1) for xw, k in zip(windows, self.kernels)]
        h = self.activation(torch.cat(pooled, dim=1).add_(self.conv_bias))  # Max then bias: the same.
        n = h.shape[1]
        for w, b in self.highway:
            z = torch.addmm(b, h, w)
            h = torch.lerp(h, torch.relu(z[:, n:]), torch.sigmoid(z[:, :n]))
        return torch.addmm(self.proj[1], h, self.proj[0]) if self.proj else h

    @torch.inference_mode()
    def cache_vocabulary(self, words: Sequence[str]) -> None:
        """Precomputes and holds the token embeddings of `words` (AllenNLP's `vocab_to_cache`)."""
        self._hold([w for w in dict.fromkeys(words) if w not in self._index])

    def _hold(self, words: list[str], chunk: int = 4096) -> None:
        """Encodes `words` (none held yet) and appends them to the table, grown geometrically."""
        if not words:
            return
        start, end = len(self._index), len(self._index) + len(words)
        if end > len(self._table):
            grown = self._table.new_empty(max(end, 2 * len(self._table)), self.proj_dim)
            grown[:start] = self._table[:start]
            self._table = grown
        for i in range(0, len(words), chunk):
            part = words[i : i + chunk]
            self._table[start + i : start + i + len(part)] = self._encode(self.chars(part))
        self._index.update((w, start + i) for i, w in enumerate(words))

    def _token_embeddings(self, words: list[str]) -> torch.Tensor:
        """`[len(words), P]`: held rows; other words through the char CNN, once per distinct word and
        then held (`token_cache`) or at every occurrence."""
        if self.token_cache:
            self._hold([w for w in dict.fromkeys(words) if w not in self._index])
            return self._table[torch.tensor([self._index[w] for w in words], dtype=torch.int64, device=self.device)]
        rows = torch.tensor([self._index.get(w, -1) for w in words], dtype=torch.int64)
        missing = (rows < 0).nonzero()[:, 0]
        if len(missing) == len(words):
            return self._encode(self.chars(words))
        out = self._table[rows.clamp(min=0).to(self.device)]
        if len(missing):
            out[missing.to(self.device)] = self._encode(self.chars([words[i] for i in missing.tolist()]))
        return out

    # ------------------------------------------------------------------------------ LSTM

    def _lstm_layer(self, layer: int, x: torch.Tensor, batch_sizes: list[int]) -> torch.Tensor:
        """x `[2, N, P]` packed (both directions) -> h `[2, N, P]` (no skip connection), zero initial state."""
        w_in, w_h, bias, w_p = self.layers[layer]
        d = self.dim
        gates = torch.baddbmm(bias.unsqueeze(1), x, w_in)  # [2, N, 4D]: the hoisted input matmul.
        out = x.new_empty(x.shape[0], x.shape[1], self.proj_dim)
        c = h = None
        start = 0
        for k in batch_sizes:
            z = gates[:, start : start + k]
            if h is not None:
                z.baddbmm_(h[:, :k], w_h)
            z[..., : 3 * d].sigmoid_()
            i, f, o, j = z[..., :d], z[..., d : 2 * d], z[..., 2 * d : 3 * d], z[..., 3 * d :].tanh_()
            c = i.mul_(j) if c is None else i.mul_(j).addcmul_(f, c[:, :k])
            if self.cell_clip:
                c.clamp_(-self.cell_clip, self.cell_clip)
            m = o.mul_(torch.tanh(c))
            h = out[:, start : start + k]
            if w_p is None:
                h.copy_(m)
            else:
                torch.bmm(m, w_p, out=h)
                if self.proj_clip:
                    h.clamp_(-self.proj_clip, self.proj_clip)
            start += k
        return out

    # ------------------------------------------------------------------------------ API

    def synchronize(self) -> None:
        """Waits for the work queued on a CUDA device (a timer must see finished work); nothing on the CPU."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @torch.inference_mode()
    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """ELMo layers of each sentence, `[n_layers + 1, n_tokens, 2 P]` float32 host arrays (zero initial
        states); computed on the device and copied back in one `[L + 1, M, 2 P]` transfer."""
        empty = np.zeros((self.n_layers + 1, 0, 2 * self.proj_dim), np.float32)
        packing = Packing(sentences, self.device)
        if not packing.words:
            return [empty.copy() for _ in sentences]
        x_f = self._token_embeddings(packing.words)  # [N, P]
        x = torch.stack([x_f, x_f[packing.backward]])  # [2, N, P]: forward, backward sequences.
        layers = [x]
        for layer in range(self.n_layers):
            h = self._lstm_layer(layer, x, packing.batch_sizes)
            x = h.add_(x) if self.skip and layer > 0 else h
            layers.append(x)
        stacked = torch.stack(layers)  # [L + 1, 2, N, P]
        both = torch.cat([stacked[:, 0, packing.out_f], stacked[:, 1, packing.out_b]], dim=-1).cpu().numpy()
        out = [empty.copy() for _ in sentences]
        for i, part in zip(packing.order, np.split(both, np.cumsum(packing.counts)[:-1], axis=1)):
            out[i] = part
        return out

    def embed_sentences(self, sentences: Iterable[Sequence[str]], batch_size: int) -> Iterator[np.ndarray]:
        """ELMo layers of each sentence, in order, in batches of `batch_size` consecutive sentences."""
        batch: list[Sequence[str]] = []
        for sentence in sentences:
            batch.append(sentence)
            if len(batch) == batch_size:
                yield from self.embed_batch(batch)
                batch = []
        if batch:
            yield from self.embed_batch(batch)


def matmul_peak_gflops(
    n: int = 2048, repeats: int = 10, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> float:
    """FLOP/s of an n x n product of random operands on `device` in `dtype`, median of `repeats`
    (torch's dense peak there)."""
    device = torch.device(device)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.mm(a, b)
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        sync()
        times.append(time.perf_counter() - start)
    return 2.0 * n**3 / float(np.median(times)) / 1e9
