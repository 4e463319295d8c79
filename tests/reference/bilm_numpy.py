"""An independent NumPy (float64) reference of ELMo inference from a bilm-tf weight file.

Written from the equations of bilm-tf's `BidirectionalLanguageModel` (and AllenNLP's `Elmo`),
not from elmo_jax code: it reads the bilm-tf datasets by name, runs one sentence at a time with
no padding or masking, and keeps LSTM states per batch row. Also writes random weight files in
the bilm-tf layout for tests.

  chars:   bilm-tf ids (bytes, 256 <S>, 257 </S>, 258 begin-of-word, 259 end-of-word, 260 pad) + 1;
           the 261-row `char_embed` gets a zero row 0 prepended (bilm-tf's inference graph)
  CNN:     per filter: max over positions of the valid convolution, + bias, activation; concat
  highway: t = sigmoid(x Wc + bc); x = t * relu(x Wt + bt) + (1 - t) * x
  proj:    x Wp + bp (identity when the file has no CNN_proj)
  LSTM:    z = [x, h] W_0 + B; i, j, f, o = split(z); c = sigmoid(f + 1) c + sigmoid(i) tanh(j),
           clip c; h = (sigmoid(o) tanh(c)) W_P_0, clip h; output h (+ x for layers >= 1 with skips)
           bilm-tf builds its LSTMCell with num_proj only when projection_dim < dim: with
           projection_dim == dim, h = sigmoid(o) tanh(c), there is no W_P_0 and proj_clip is unused
           (TF's LSTMCell clips only a projection); projection_dim > dim is no bilm-tf biLM.
"""

from __future__ import annotations

import json

import h5py
import numpy as np


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def char_ids(word: str, max_chars: int) -> np.ndarray:
    """bilm-tf Batcher ids of one token (already +1 shifted), `[max_chars]`."""
    ids = np.full(max_chars, 260)
    if word in ("<S>", "</S>"):
        ids[:3] = [258, 256 if word == "<S>" else 257, 259]
    else:
        data = list(word.encode("utf-8", "ignore")[: max_chars - 2])
        ids[0] = 258
        ids[1 : 1 + len(data)] = data
        ids[1 + len(data)] = 259
    return ids + 1


class ReferenceBiLM:
    """ELMo from bilm-tf `options` (dict) and `weights` (dataset name -> array)."""

    def __init__(self, options: dict, weights: dict[str, np.ndarray]):
        self.options = options
        self.w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
        lstm = options["lstm"]
        self.n_layers, self.dim, self.proj = lstm["n_layers"], lstm["dim"], lstm["projection_dim"]
        if self.proj > self.dim:
            raise ValueError("bilm-tf builds no biLM with projection_dim > dim")
        self.projected = self.proj < self.dim  # bilm-tf: LSTMCell(dim, num_proj=projection_dim)
        self.cell_clip, self.proj_clip = lstm.get("cell_clip"), lstm.get("proj_clip")
        self.skip = lstm["use_skip_connections"]
        self.max_chars = options["char_cnn"]["max_characters_per_token"]

    @classmethod
    def from_files(cls, options_path: str, weights_path: str) -> "ReferenceBiLM":
        with open(options_path) as f:
            options = json.load(f)
        weights: dict[str, np.ndarray] = {}

        def read(name: str, obj) -> None:
            if isinstance(obj, h5py.Dataset):
                weights[name] = obj[...]

        with h5py.File(weights_path, "r") as f:
            f.visititems(read)
        return cls(options, weights)

    def token_embedding(self, word: str) -> np.ndarray:
        """`[P]`."""
        cnn = self.options["char_cnn"]
        table = np.concatenate([np.zeros((1, self.w["char_embed"].shape[1])), self.w["char_embed"]])
        x = table[char_ids(word, self.max_chars)]  # [C, d]
        act = np.tanh if cnn["activation"] == "tanh" else (lambda v: np.maximum(v, 0.0))
        pooled = []
        for i, (width, _) in enumerate(cnn["filters"]):
            kernel = self.w[f"CNN/W_cnn_{i}"][0]  # [w, d, n]
            conv = np.stack([
                np.einsum("kd,kdn->n", x[t : t + width], kernel) for t in range(self.max_chars - width + 1)
            ])
            pooled.append(act(conv.max(axis=0) + self.w[f"CNN/b_cnn_{i}"]))
        h = np.concatenate(pooled)
        for k in range(cnn.get("n_highway") or 0):
            g = f"CNN_high_{k}/"
            t = _sigmoid(h @ self.w[g + "W_carry"] + self.w[g + "b_carry"])
            h = t * np.maximum(h @ self.w[g + "W_transform"] + self.w[g + "b_transform"], 0.0) + (1.0 - t) * h
        if "CNN_proj/W_proj" in self.w:
            h = h @ self.w["CNN_proj/W_proj"] + self.w["CNN_proj/b_proj"]
        return h

    def zero_state(self) -> dict:
        """{(direction, layer): (c [D], h [P])}."""
        return {(d, l): (np.zeros(self.dim), np.zeros(self.proj)) for d in (0, 1) for l in range(self.n_layers)}

    def _lstm(self, direction: int, xs: np.ndarray, state: dict) -> list[np.ndarray]:
        """Runs one direction's stack over xs `[T, P]`; updates `state`; outputs per layer `[T, P]`."""
        outputs = []
        for layer in range(self.n_layers):
            root = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            w0, b = self.w[root + "W_0"], self.w[root + "B"]
            c, h = state[(direction, layer)]
            ys = []
            for x in xs:
                z = np.concatenate([x, h]) @ w0 + b
                i, j, f, o = np.split(z, 4)
                c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
                if self.cell_clip:
                    c = np.clip(c, -self.cell_clip, self.cell_clip)
                h = _sigmoid(o) * np.tanh(c)
                if self.projected:
                    h = h @ self.w[root + "W_P_0"]
                    if self.proj_clip:
                        h = np.clip(h, -self.proj_clip, self.proj_clip)
                ys.append(h + x if self.skip and layer > 0 else h)
            state[(direction, layer)] = (c, h)
            xs = np.stack(ys)
            outputs.append(xs)
        return outputs

    def embed(self, tokens: list[str], state: dict) -> np.ndarray:
        """ELMo layers `[L + 1, n, 2P]` of one sentence; updates `state` (untouched when empty)."""
        n = len(tokens)
        if n == 0:
            return np.zeros((self.n_layers + 1, 0, 2 * self.proj))
        x = np.stack([self.token_embedding(w) for w in ["<S>", *tokens, "</S>"]])
        forward = self._lstm(0, x, state)
        backward = [y[::-1] for y in self._lstm(1, x[::-1], state)]
        layers = [np.concatenate([x, x], axis=-1)] + [np.concatenate(fb, axis=-1) for fb in zip(forward, backward)]
        return np.stack(layers)[:, 1 : n + 1]

    def embed_batches(self, sentences: list[list[str]], batch_size: int, stateful: bool = True) -> list[np.ndarray]:
        """Consecutive sentences in batches; row r's state carries to row r of the next batch."""
        states = [self.zero_state() for _ in range(batch_size)]
        out = []
        for start in range(0, len(sentences), batch_size):
            if not stateful:
                states = [self.zero_state() for _ in range(batch_size)]
            for row, tokens in enumerate(sentences[start : start + batch_size]):
                out.append(self.embed(tokens, states[row]))
        return out


def random_bilm_weights(options: dict, seed: int, with_proj: bool = True) -> dict[str, np.ndarray]:
    """Random float32 weights in the bilm-tf layout (dataset name -> array) for `options`.

    `with_proj`: write `CNN_proj`. `W_P_0` is written unless projection_dim == dim (bilm-tf);
    with projection_dim > dim that is AllenNLP's layout (no bilm-tf biLM has that shape).
    """
    rng = np.random.default_rng(seed)
    cnn, lstm = options["char_cnn"], options["lstm"]
    d, p, dim = cnn["embedding"]["dim"], lstm["projection_dim"], lstm["dim"]
    n_filters = sum(n for _, n in cnn["filters"])

    def normal(*shape: int, scale: float = 0.5) -> np.ndarray:
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    w = {"char_embed": rng.uniform(-1.0, 1.0, (261, d)).astype(np.float32)}
    for i, (width, n) in enumerate(cnn["filters"]):
        w[f"CNN/W_cnn_{i}"], w[f"CNN/b_cnn_{i}"] = normal(1, width, d, n), normal(n, scale=0.1)
    for k in range(cnn.get("n_highway") or 0):
        for gate in ("carry", "transform"):
            w[f"CNN_high_{k}/W_{gate}"] = normal(n_filters, n_filters, scale=0.3)
            w[f"CNN_high_{k}/b_{gate}"] = normal(n_filters)
    if with_proj:
        w["CNN_proj/W_proj"], w["CNN_proj/b_proj"] = normal(n_filters, p, scale=0.3), normal(p, scale=0.1)
    for direction in (0, 1):
        for layer in range(lstm["n_layers"]):
            root = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            w[root + "W_0"], w[root + "B"] = normal(2 * p, 4 * dim), normal(4 * dim, scale=0.2)
            if p != dim:
                w[root + "W_P_0"] = normal(dim, p)
    return w


def write_bilm_files(options: dict, weights: dict[str, np.ndarray], options_path: str, weights_path: str) -> None:
    """Writes `options.json` and the hdf5 weight file with h5py, in the bilm-tf layout."""
    with open(options_path, "w") as f:
        json.dump(options, f)
    with h5py.File(weights_path, "w") as f:
        for name, value in weights.items():
            f.create_dataset(name, data=value)
