"""A carefully written PyTorch reference of the elmo-jax biLM training step, for speed comparison.

  python benchmarks/pytorch_reference.py --config=configs/elmo_small.py [--config.x=y] [--steps=20]
      [--vocab_size=V] [--compile] [--lstm=custom|autograd|cudnn] [--softmax_update=dense|rows]
      [--device=cpu|cuda]
  python benchmarks/pytorch_reference.py --config=configs/tests/tiny.py --check

Benchmark-only: needs `pip install torch` (not a dependency of elmo-jax). It reads configs with the
same flags as benchmarks/throughput.py (whose --config/--steps/--vocab_size flags it reuses), runs
the same training step on the same synthetic Zipf batches, and prints as its last line one JSON
object with throughput.py's keys plus "framework" and "mode" ("eager" or "compile").

The model and step are those of elmo-jax (elmo_jax/model/*.py, elmo_jax/training/step.py):
  char embedding (row 0 fixed at zero) -> per-filter valid conv + max over positions + activation
  -> highway layers -> projection to P; per direction (separate weights, both directions batched
  with bmm as elmo-jax batches them) n_layers LSTM-with-projection layers in TF semantics (gates
  i, j, f, o; forget bias 1; cell clip; projection clip; input matmul hoisted out of the time loop;
  residual from layer 2 on); dropout on each layer input and on the softmax input; shared sampled
  softmax (K distinct log-uniform negatives per step, log expected count subtracted, accidental
  hits removed); loss 0.5 (fwd + bwd); global-norm clipping then the config's optimizer
  (Adagrad lr 0.2, accumulator 1.0 for the ELMo configs); LSTM states carried (detached).

What is optimised here (eager mode):
  * the LSTM time loop is a custom autograd.Function with a hand-written backward pass, as
    elmo-jax's `lstm_recurrence`: the loop does only the sequential work, writing gates / states
    into preallocated buffers with in-place and out= ops; the gate-derivative coefficients are
    computed for all steps at once before the reverse loop; the weight gradients (W_input,
    W_hidden, W_proj, bias) and d input are single large bmm's over all steps after it
    (`--lstm=autograd` is the plain autograd loop, for comparison);
  * both directions batched in every matmul (bmm over the direction axis), the bias and forget
    bias folded into the hoisted input matmul (baddbmm), highway carry/transform as one GEMM,
    `lerp` for the highway mix, conv bias added after the max;
  * char CNN as unfold + one GEMM per filter and max-with-indices pooling (measured faster here
    than F.conv1d (oneDNN) and than amax; `--conv=conv1d` keeps the oneDNN convolution);
  * one gather of the softmax rows (targets and negatives together), so one dense W gradient;
    `--softmax_update=rows` goes further (as bilm-tf's IndexedSlices did): only the touched
    softmax rows get a gradient and an Adagrad update (mathematically the same step for Adagrad);
  * fused (single-kernel) torch optimizers where this torch build supports them on CPU, foreach
    global-norm clipping that rescales only when the norm exceeds the limit;
  * process tuning: torch.set_num_threads(os.cpu_count()), OMP_WAIT_POLICY=ACTIVE (set before
    torch loads; on this VM a sleeping OpenMP thread takes milliseconds to wake), and the glibc
    malloc tuning elmo-jax's entry points use (`elmo_jax.runtime.host_memory`), so freed activations are
    reused rather than page-faulted in again every step.
`--compile`: torch.compile (inductor, compiled in-process) of the encoder and the loss head
("regional"; with `--lstm=autograd` the LSTM cell step too, compiled once and called per step);
`--compile_scope=full --lstm=autograd` compiles the whole forward pass (minutes of compilation).
There is no fused (cuDNN-style) LSTM-with-projection-and-clipping kernel on CPU:
torch.nn.LSTM(proj_size=...) has no clipping and another gate order, so the hand-written loop is
the honest equivalent.
`--lstm=cudnn` is that torch.nn.LSTM(proj_size=...) all the same, one per layer and direction (the
weights in its layout and gate order, elmo-jax's forget bias folded into bias_ih): on GPUs it
runs cuDNN's fused LSTM, the fastest PyTorch LSTM there is. It computes elmo-jax's LSTM without
the cell and projection clips (`model.lstm.cell_clip`/`proj_clip`), and without a mask (every
position of the synthetic batches is real; a batch with padding is refused).
`--device=cuda` runs the step on a GPU (timed to the end of its work) and measures the matmul peak
there (8192 x 8192, as throughput.py on accelerators); `--config.model.dtype=bfloat16` runs the
forward pass and the loss under `torch.autocast(bfloat16)` (float32 parameters and optimizer, as
elmo-jax), with `--lstm=cudnn` or `--lstm=autograd`.

--check builds elmo-jax's model (init_params on the config) and this one with the same weights,
and compares the full-softmax loss, its gradients for every parameter, the new LSTM states, one
optimizer update, and the sampled-softmax NLL with the same negatives (masked positions and
active cell / projection clips included; `--lstm=cudnn` against elmo-jax without clips, on a
batch without padding); it also checks that --softmax_update=rows trains exactly as dense.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# OpenMP threads spin between parallel regions instead of sleeping (set before torch loads
# libgomp; an explicit OMP_WAIT_POLICY wins). On this kind of VM a sleeping thread takes
# milliseconds to wake, which otherwise dominates every small op. XLA's thread pool spins too.
os.environ.setdefault("OMP_WAIT_POLICY", "ACTIVE")
# torch.compile: compile in-process. Inductor's pool of compile worker processes otherwise stays
# alive and competes for the (two) cores during the timed steps.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import numpy as np
import torch
import torch.nn.functional as F
from absl import app, flags
from ml_collections import config_flags

# Reuses throughput.py's flags (--config, --steps, --vocab_size) and its synthetic batches.
from benchmarks.pytorch_embed import matmul_peak_gflops
from benchmarks.throughput import throughput_record, zipf_batch
from elmo_jax.runtime import host_memory
from elmo_jax.model.softmax import unique_sampling_tries

FLAGS = flags.FLAGS
flags.DEFINE_boolean("compile", False, "Use torch.compile (mode 'compile') instead of eager.")
flags.DEFINE_enum("compile_scope", "regional", ["regional", "full"],
                  "regional: compile the encoder and the loss head (and the LSTM cell step with "
                  "--lstm=autograd); full: the whole forward pass.")
flags.DEFINE_enum("lstm", "custom", ["custom", "autograd", "cudnn"],
                  "LSTM loop: hand-written backward (custom), plain autograd (autograd; with "
                  "--compile its cell step is compiled), or torch.nn.LSTM(proj_size=...) per layer "
                  "and direction (cudnn: cuDNN's fused LSTM on GPUs; no cell or projection clipping "
                  "and no mask).")
flags.DEFINE_enum("softmax_update", "dense", ["dense", "rows"],
                  "dense: dense softmax gradient and update (as elmo-jax); rows: only the gathered "
                  "rows (Adagrad/SGD only).")
flags.DEFINE_enum("conv", "unfold", ["conv1d", "unfold"], "Char CNN: unfold + matmul, or F.conv1d (oneDNN).")
flags.DEFINE_boolean("malloc_tuning", True,
                     "elmo_jax.runtime.host_memory's glibc malloc tuning (as train.py): freed activations are "
                     "reused instead of page-faulted in again every step.")
flags.DEFINE_integer("threads", 0, "torch threads (0 = os.cpu_count()).")
flags.DEFINE_integer("warmup", 2, "Untimed warm-up steps (compilation happens here).")
flags.DEFINE_boolean("check", False, "Compare with elmo-jax on the given (tiny) config and exit.")
flags.DEFINE_string("device", "cpu", "torch device of the step and the matmul peak: cpu or cuda[:i].")

N_CHARACTERS = 262
NEG_INF = -1e30


# ----------------------------------------------------------------------------------------------
# LSTM with projection and clipping, both directions batched on a leading axis of 2.
# ----------------------------------------------------------------------------------------------


class BiLSTMLayerFunction(torch.autograd.Function):
    """One layer over all time steps: hoisted input matmul + recurrence, hand-written backward.

    x `[2, B, T, I]`, w_input `[2, I, 4D]`, bias `[2, 4D]` (forget bias already added), w_hidden
    `[2, P, 4D]`, w_proj `[2, D, P]`, c0 `[2, B, D]`, h0 `[2, B, P]`, mask `[2, B, T, 1]` float or
    None (all ones). Returns outputs `[2, B, T, P]`, final c, final h.
    """

    @staticmethod
    def forward(ctx, x, w_input, bias, w_hidden, w_proj, c0, h0, mask, cell_clip, proj_clip):
        n_dir, batch, steps, d_in = x.shape
        gates_dim, p = w_input.shape[-1], w_proj.shape[-1]
        dim = gates_dim // 4
        # Gate pre-activations for all steps (bias included), then activated in place step by step.
        gates = torch.baddbmm(bias.unsqueeze(1), x.reshape(n_dir, batch * steps, d_in), w_input)
        gates = gates.view(n_dir, batch, steps, gates_dim)
        out = x.new_empty(n_dir, batch, steps, p)
        c_all = x.new_empty(n_dir, batch, steps, dim)  # state after each step
        tanh_c_all = x.new_empty(n_dir, batch, steps, dim)
        m_all = x.new_empty(n_dir, batch, steps, dim)
        c_raw_all = x.new_empty(n_dir, batch, steps, dim) if cell_clip else None
        h_raw_all = x.new_empty(n_dir, batch, steps, p) if proj_clip else None
        c, h = c0, h0
        for t in range(steps):
            g = gates[:, :, t]
            g.baddbmm_(h, w_hidden)
            i, j, f, o = g.chunk(4, dim=-1)
            i.sigmoid_()
            j.tanh_()
            f.sigmoid_()
            o.sigmoid_()
            mt = None if mask is None else mask[:, :, t]
            if cell_clip:
                c_raw = torch.addcmul(i * j, f, c, out=c_raw_all[:, :, t])
                c_new = torch.clamp(c_raw, -cell_clip, cell_clip, out=None if mask is not None else c_all[:, :, t])
            else:
                c_new = torch.addcmul(i * j, f, c, out=None if mask is not None else c_all[:, :, t])
            tanh_c = torch.tanh(c_new, out=tanh_c_all[:, :, t])
            m = torch.mul(o, tanh_c, out=m_all[:, :, t])
            if proj_clip:
                h_raw = torch.bmm(m, w_proj, out=h_raw_all[:, :, t])
                h_new = torch.clamp(h_raw, -proj_clip, proj_clip, out=None if mask is not None else out[:, :, t])
            else:
                h_new = torch.bmm(m, w_proj, out=None if mask is not None else out[:, :, t])
            if mask is not None:
                c_new = torch.where(mt > 0, c_new, c, out=c_all[:, :, t])
                h_new = torch.where(mt > 0, h_new, h, out=out[:, :, t])
            c, h = c_new, h_new
        ctx.save_for_backward(x, w_input, w_hidden, w_proj, c0, h0, gates, out, c_all, tanh_c_all, m_all)
        ctx.extra = (c_raw_all, h_raw_all, mask, cell_clip, proj_clip)
        ctx.set_materialize_grads(False)
        return out, c.clone(), h.clone()

    @staticmethod
    def backward(ctx, d_out, d_c_final, d_h_final):
        x, w_input, w_hidden, w_proj, c0, h0, gates, out, c_all, tanh_c_all, m_all = ctx.saved_tensors
        c_raw_all, h_raw_all, mask, cell_clip, proj_clip = ctx.extra
        n_dir, batch, steps, d_in = x.shape
        gates_dim, p = w_input.shape[-1], w_proj.shape[-1]
        dim = gates_dim // 4
        if d_out is None:
            d_out = torch.zeros_like(out)
        si, tj, sf, so = gates.chunk(4, dim=-1)
        c_prev_all = torch.cat([c0.unsqueeze(2), c_all[:, :, :-1]], dim=2)
        # d/dz coefficients for all steps at once: dz = [dc, dc, dc, dm] * coef.
        coef = torch.empty_like(gates)
        ci, cj, cf, co = coef.chunk(4, dim=-1)
        torch.mul(tj, si * (1 - si), out=ci)
        torch.mul(si, 1 - tj * tj, out=cj)
        torch.mul(c_prev_all, sf * (1 - sf), out=cf)
        torch.mul(tanh_c_all, so * (1 - so), out=co)
        coef4 = coef.view(n_dir, batch, steps, 4, dim)
        dtanh = so * (1 - tanh_c_all * tanh_c_all)  # dc += dm * dtanh
        clip_c = (c_raw_all.abs() <= cell_clip).to(x.dtype) if cell_clip else None
        clip_h = (h_raw_all.abs() <= proj_clip).to(x.dtype) if proj_clip else None
        if mask is not None:
            dtanh = dtanh * mask
            if clip_h is None:
                clip_h = mask.expand(n_dir, batch, steps, p)
            else:
                clip_h = clip_h * mask
        dz_all = torch.empty_like(gates)
        dz4 = dz_all.view(n_dir, batch, steps, 4, dim)
        dh_raw_all = torch.empty_like(out)
        wp_t, wh_t = w_proj.transpose(1, 2), w_hidden.transpose(1, 2)
        dc, dh = d_c_final, d_h_final
        for t in reversed(range(steps)):
            dh = d_out[:, :, t] if dh is None else d_out[:, :, t] + dh
            dh_raw = dh if clip_h is None else torch.mul(dh, clip_h[:, :, t], out=dh_raw_all[:, :, t])
            if clip_h is None:
                dh_raw_all[:, :, t] = dh_raw
            dm = torch.bmm(dh_raw, wp_t)
            if mask is not None:
                mt = mask[:, :, t]
                dc_in = dc
                dc = dm * dtanh[:, :, t] if dc is None else torch.addcmul(dm * dtanh[:, :, t], dc, mt)
            else:
                dc = dm * dtanh[:, :, t] if dc is None else torch.addcmul(dc, dm, dtanh[:, :, t])
            if clip_c is not None:
                dc = dc * clip_c[:, :, t]
            torch.mul(dc.unsqueeze(2), coef4[:, :, t, :3], out=dz4[:, :, t, :3])
            torch.mul(dm, co[:, :, t], out=dz4[:, :, t, 3])
            dz = dz_all[:, :, t]
            dc_new = dc * sf[:, :, t]
            dh_new = torch.bmm(dz, wh_t)
            if mask is not None:  # masked steps pass the state's cotangent straight through
                keep = 1 - mt
                if dc_in is not None:
                    dc_new = torch.addcmul(dc_new, dc_in, keep)
                dh_new = torch.addcmul(dh_new, dh, keep)
            dc, dh = dc_new, dh_new
        dz2 = dz_all.view(n_dir, batch * steps, gates_dim)
        h_prev = torch.cat([h0.unsqueeze(2), out[:, :, :-1]], dim=2).view(n_dir, batch * steps, p)
        d_w_hidden = torch.bmm(h_prev.transpose(1, 2), dz2)
        d_w_proj = torch.bmm(m_all.view(n_dir, batch * steps, dim).transpose(1, 2),
                             dh_raw_all.view(n_dir, batch * steps, p))
        x2 = x.reshape(n_dir, batch * steps, d_in)
        d_w_input = torch.bmm(x2.transpose(1, 2), dz2)
        d_bias = dz2.sum(dim=1)
        d_x = torch.bmm(dz2, w_input.transpose(1, 2)).view_as(x) if ctx.needs_input_grad[0] else None
        d_c0 = dc if ctx.needs_input_grad[5] else None
        d_h0 = dh if ctx.needs_input_grad[6] else None
        return d_x, d_w_input, d_bias, d_w_hidden, d_w_proj, d_c0, d_h0, None, None, None


def lstm_cell(xw_t, c, h, w_hidden, w_proj, cell_clip: float, proj_clip: float):
    """One time step (plain autograd; forget bias already in xw_t)."""
    z = torch.baddbmm(xw_t, h, w_hidden)
    i, j, f, o = z.chunk(4, dim=-1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
    if cell_clip:
        c_new = c_new.clamp(-cell_clip, cell_clip)
    h_new = torch.bmm(torch.sigmoid(o) * torch.tanh(c_new), w_proj)
    if proj_clip:
        h_new = h_new.clamp(-proj_clip, proj_clip)
    return c_new, h_new


def lstm_layer_autograd(cell, x, w_input, bias, w_hidden, w_proj, c, h, mask, cell_clip, proj_clip):
    n_dir, batch, steps, d_in = x.shape
    xw = torch.baddbmm(bias.unsqueeze(1), x.reshape(n_dir, batch * steps, d_in), w_input)
    xw = xw.view(n_dir, batch, steps, -1)
    outs = []
    for t in range(steps):
        c_new, h_new = cell(xw[:, :, t], c, h, w_hidden, w_proj, cell_clip, proj_clip)
        if mask is not None:
            mt = mask[:, :, t] > 0
            c_new, h_new = torch.where(mt, c_new, c), torch.where(mt, h_new, h)
        c, h = c_new, h_new
        outs.append(h)
    return torch.stack(outs, dim=2), c, h


# ----------------------------------------------------------------------------------------------
# The model.
# ----------------------------------------------------------------------------------------------


# torch.nn.LSTM's gate blocks (i, f, g, o) taken from elmo-jax's (i, j, f, o): j is PyTorch's g.
TORCH_GATES = (0, 2, 1, 3)


def cudnn_lstm(input_dim: int, dim: int, proj_dim: int) -> torch.nn.LSTM:
    """One layer of one direction as torch.nn.LSTM (cuDNN's fused kernel on GPUs), elmo-jax's
    forget bias 1 folded into bias_ih; bias_hh stays zero and frozen, so that the layer has one bias
    as elmo-jax's. No cell or projection clipping (torch.nn.LSTM has none)."""
    lstm = torch.nn.LSTM(input_dim, dim, proj_size=proj_dim, batch_first=True)
    with torch.no_grad():
        lstm.bias_ih_l0.zero_()[dim: 2 * dim] = 1.0  # PyTorch's f block
        lstm.bias_hh_l0.zero_()
    lstm.bias_hh_l0.requires_grad_(False)
    return lstm


def cudnn_layer(lstms: torch.nn.ModuleList, x, c0, h0):
    """Both directions of a layer: x `[2, B, T, I]`, c0 `[2, B, D]`, h0 `[2, B, P]` -> outputs
    `[2, B, T, P]`, final c, final h."""
    outs, cs, hs = [], [], []
    for d, lstm in enumerate(lstms):
        out, (h, c) = lstm(x[d], (h0[d][None].contiguous(), c0[d][None].contiguous()))
        outs.append(out), cs.append(c[0]), hs.append(h[0])
    return torch.stack(outs), torch.stack(cs), torch.stack(hs)


def _uniform(shape, limit):
    return torch.nn.Parameter(torch.empty(shape).uniform_(-limit, limit))


def _normal(shape, std):
    return torch.nn.Parameter(torch.empty(shape).normal_(0.0, std))


def _const(shape, value):
    return torch.nn.Parameter(torch.full(shape, float(value)))


class TorchBiLM(torch.nn.Module):
    """elmo-jax's BiLM (char-CNN encoder) in PyTorch, with elmo-jax's initialisers."""

    def __init__(self, model_config, vocab_size: int, lstm_impl: str = "custom", conv: str = "unfold"):
        super().__init__()
        if model_config.token_encoder != "char_cnn":
            raise NotImplementedError("only model.token_encoder='char_cnn'")
        if model_config.dtype not in ("float32", "bfloat16"):
            raise NotImplementedError("only model.dtype='float32' or 'bfloat16'")
        if model_config.dtype == "bfloat16" and lstm_impl == "custom":
            raise NotImplementedError("model.dtype='bfloat16' (autocast) needs --lstm=cudnn or --lstm=autograd")
        cnn, lstm = model_config.char_cnn, model_config.lstm
        self.filters = [tuple(f) for f in cnn.filters]
        self.activation = {"relu": torch.relu, "tanh": torch.tanh}[cnn.activation]
        self.dim, self.proj_dim, self.n_layers = lstm.dim, model_config.width, lstm.n_layers
        self.cell_clip, self.proj_clip = float(lstm.cell_clip or 0.0), float(lstm.proj_clip or 0.0)
        self.skip = lstm.use_skip_connections
        self.dropout = float(model_config.dropout)
        self.lstm_impl, self.conv = lstm_impl, conv
        d = cnn.embed_dim
        self.char_embed = _uniform((N_CHARACTERS, d), 1.0)
        self.register_buffer("char_row_mask", (torch.arange(N_CHARACTERS) != 0).float()[:, None])
        self.conv_w = torch.nn.ParameterList()  # torch conv1d layout [n, d, w]
        self.conv_b = torch.nn.ParameterList()
        for width, channels in self.filters:
            if cnn.activation == "relu":
                self.conv_w.append(_uniform((channels, d, width), 0.05))
            else:
                self.conv_w.append(_normal((channels, d, width), math.sqrt(1.0 / (width * d))))
            self.conv_b.append(_const((channels,), 0.0))
        n_filters = sum(n for _, n in self.filters)
        self.n_filters = n_filters
        self.hw_w = torch.nn.ParameterList()  # [F, 2F]: carry | transform, x @ W
        self.hw_b = torch.nn.ParameterList()
        for _ in range(cnn.n_highway):
            self.hw_w.append(_normal((n_filters, 2 * n_filters), math.sqrt(1.0 / n_filters)))
            self.hw_b.append(torch.nn.Parameter(torch.cat([torch.full((n_filters,), -2.0), torch.zeros(n_filters)])))
        self.proj_w = _normal((n_filters, self.proj_dim), math.sqrt(1.0 / n_filters))
        self.proj_b = _const((self.proj_dim,), 0.0)
        gates = 4 * self.dim
        if lstm_impl == "cudnn":
            self.cudnn_lstms = torch.nn.ModuleList(
                torch.nn.ModuleList(cudnn_lstm(self.proj_dim, self.dim, self.proj_dim) for _ in range(2))
                for _ in range(self.n_layers)
            )
        else:
            self.w_input, self.w_hidden, self.lstm_b, self.w_p = (torch.nn.ParameterList() for _ in range(4))
            for _ in range(self.n_layers):
                self.w_input.append(_uniform((2, self.proj_dim, gates), 0.05))
                self.w_hidden.append(_uniform((2, self.proj_dim, gates), 0.05))
                self.lstm_b.append(_const((2, gates), 0.0))
                self.w_p.append(_uniform((2, self.dim, self.proj_dim), 0.05))
        forget = torch.zeros(gates)
        forget[2 * self.dim: 3 * self.dim] = 1.0
        self.register_buffer("forget_bias", forget)
        self.softmax_w = _normal((vocab_size, self.proj_dim), 1.0 / math.sqrt(self.proj_dim))
        self.softmax_b = _const((vocab_size,), 0.0)
        self.cell = lstm_cell
        self.encode = self._encode

    def initial_state(self, batch: int):
        device = self.softmax_b.device
        return [(torch.zeros(2, batch, self.dim, device=device), torch.zeros(2, batch, self.proj_dim, device=device))
                for _ in range(self.n_layers)]

    def _encode(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char ids `[N, C]` -> `[N, P]`."""
        n_chars = char_ids.shape[-1]
        x = F.embedding(char_ids, self.char_embed * self.char_row_mask)  # [N, C, d]
        # Max over positions with indices: the backward pass scatters to one argmax instead of
        # splitting among ties as amax / jnp.max do. Ties come from identical windows (padding
        # characters), so the parameter gradients are the same (see --check), and it is faster.
        pooled = []
        if self.conv == "conv1d":
            xc = x.transpose(1, 2).contiguous()  # [N, d, C]
            for w, b in zip(self.conv_w, self.conv_b):
                pooled.append(self.activation(F.conv1d(xc, w).max(dim=2).values + b))
        else:  # unfold + one GEMM per filter: [N * L, d * w] @ [d * w, n]
            for (width, channels), w, b in zip(self.filters, self.conv_w, self.conv_b):
                xu = x.unfold(1, width, 1).reshape(-1, n_chars - width + 1, x.shape[-1] * width)  # [N, L, d*w]
                y = torch.matmul(xu, w.reshape(channels, -1).t())
                pooled.append(self.activation(y.max(dim=1).values + b))
        h = torch.cat(pooled, dim=-1)
        nf = self.n_filters
        for w, b in zip(self.hw_w, self.hw_b):
            z = torch.addmm(b, h, w)
            h = torch.lerp(h, torch.relu(z[:, nf:]).type_as(h), torch.sigmoid(z[:, :nf]).type_as(h))  # (autocast: z is bfloat16)
        return torch.addmm(self.proj_b, h, self.proj_w)

    def forward(self, char_ids, mask, state, train: bool):
        """char_ids `[2, B, T, C]`, mask `[2, B, T, 1]` float or None -> top `[2, B, T, P]`, new state."""
        n_dir, batch, steps, n_chars = char_ids.shape
        x = self.encode(char_ids.reshape(-1, n_chars)).view(n_dir, batch, steps, self.proj_dim)
        new_state = []
        p = self.dropout if train else 0.0
        for k in range(self.n_layers):
            x_in = F.dropout(x, p) if p > 0 else x
            c0, h0 = state[k]
            if self.lstm_impl == "cudnn":
                if mask is not None:
                    raise NotImplementedError("--lstm=cudnn has no mask: every position of a batch must be real")
                out, c, h = cudnn_layer(self.cudnn_lstms[k], x_in, c0, h0)
            else:
                bias = self.lstm_b[k] + self.forget_bias
                args = (x_in, self.w_input[k], bias, self.w_hidden[k], self.w_p[k], c0, h0, mask,
                        self.cell_clip, self.proj_clip)
                if self.lstm_impl == "custom":
                    out, c, h = BiLSTMLayerFunction.apply(*args)
                else:
                    out, c, h = lstm_layer_autograd(self.cell, *args)
            x = out + x_in if (self.skip and k > 0) else out
            new_state.append((c.detach(), h.detach()))
        top = F.dropout(x, p) if p > 0 else x
        return top, new_state


def sampled_softmax_nll(w_rows, b_rows, hidden, n_targets: int, sampled_log_expected, target_log_expected, hits):
    """Per-token NLL `[N]`. w_rows/b_rows: the N target rows then the K sampled rows."""
    w_true, w_sampled = w_rows[:n_targets], w_rows[n_targets:]
    b_true, b_sampled = b_rows[:n_targets], b_rows[n_targets:]
    true_logit = (hidden * w_true).sum(-1) + b_true - target_log_expected
    sampled = torch.addmm(b_sampled - sampled_log_expected, hidden, w_sampled.t())  # [N, K]
    sampled = sampled.masked_fill(hits, NEG_INF)
    return torch.logaddexp(true_logit, torch.logsumexp(sampled, dim=-1)) - true_logit


def full_softmax_nll(w, b, hidden, targets):
    logits = torch.addmm(b, hidden, w.t())
    return torch.logsumexp(logits, dim=-1) - logits.gather(1, targets[:, None])[:, 0]


def masked_loss(nll, mask_float, count):
    """0.5 * (forward + backward) mean NLL; nll `[2*B*T]`."""
    if mask_float is None:
        per_dir = nll.view(2, -1).sum(1) / count
    else:
        per_dir = (nll.view(2, -1) * mask_float.view(2, -1)).sum(1) / count
    return 0.5 * per_dir.sum(), per_dir


# ----------------------------------------------------------------------------------------------
# Training step.
# ----------------------------------------------------------------------------------------------


def lr_schedule(opt, num_steps: int):
    peak, warmup = opt.learning_rate, opt.warmup_steps

    def lr(step: int) -> float:
        if warmup > 0 and step < warmup:
            return peak * step / warmup
        s = step - warmup
        if opt.schedule == "constant":
            return peak
        frac = min(s / max(num_steps - warmup, 1), 1.0)
        if opt.schedule == "cosine":
            return peak * 0.5 * (1 + math.cos(math.pi * frac))
        return peak * (1 - frac)

    return lr


def _fused_ok(cls, device: torch.device, **kwargs) -> bool:
    try:
        p = torch.nn.Parameter(torch.zeros(2, device=device))
        p.grad = torch.ones(2, device=device)
        cls([p], fused=True, **kwargs).step()
        return True
    except Exception:  # noqa: BLE001 - any failure means: not available on this build/device
        return False


def make_optimizer(params, train_config):
    opt = train_config.optimizer
    if opt.name == "adagrad":
        kwargs = dict(lr=opt.learning_rate, initial_accumulator_value=opt.initial_accumulator_value, eps=0.0)
        cls = torch.optim.Adagrad
    elif opt.name == "adam":
        kwargs = dict(lr=opt.learning_rate, betas=(opt.b1, opt.b2), eps=opt.eps)
        cls = torch.optim.Adam
    elif opt.name == "sgd":
        kwargs = dict(lr=opt.learning_rate)
        cls = torch.optim.SGD
    else:
        raise ValueError(opt.name)
    fused = _fused_ok(cls, params[0].device, **kwargs)
    extra = {"fused": True} if fused else {"foreach": True}
    return cls(params, **kwargs, **extra), ("fused" if fused else "foreach")


class Trainer:
    """State (model, optimizer, carried LSTM states) and the train step."""

    def __init__(self, config, vocab_size: int, batch: int, lstm_impl: str, softmax_update: str,
                 conv: str, compile_scope: str | None, device: str = "cpu"):
        self.config = config
        self.device = torch.device(device)
        self.model = TorchBiLM(config.model, vocab_size, lstm_impl, conv).to(self.device)
        # bfloat16: autocast (matmuls and cuDNN's LSTM in bfloat16, float32 parameters and optimizer).
        self.bfloat16 = config.model.dtype == "bfloat16"
        self.vocab_size = vocab_size
        sm = config.model.softmax
        self.sampled, self.num_sampled, self.unique = sm.sampled, sm.n_negative_samples, sm.unique_samples
        if self.sampled:
            ids = torch.arange(vocab_size, dtype=torch.float64)
            self.probs = (torch.log1p(1.0 / (ids + 1.0)) / math.log(vocab_size + 1.0)).float().to(self.device)
            self.num_tries = unique_sampling_tries(vocab_size, self.num_sampled) if self.unique else None
        self.rows = softmax_update == "rows"
        if self.rows and config.train.optimizer.name not in ("adagrad", "sgd"):
            raise ValueError("--softmax_update=rows is only the same update for adagrad / sgd")
        softmax_params = {id(self.model.softmax_w), id(self.model.softmax_b)}
        self.dense_params = [p for p in self.model.parameters()
                             if p.requires_grad and not (self.rows and id(p) in softmax_params)]
        self.optimizer, self.opt_kind = make_optimizer(self.dense_params, config.train)
        if self.rows:
            self.acc_w = torch.full_like(self.model.softmax_w, config.train.optimizer.initial_accumulator_value)
            self.acc_b = torch.full_like(self.model.softmax_b, config.train.optimizer.initial_accumulator_value)
        self.lr = lr_schedule(config.train.optimizer, config.train.num_steps or 1_000_000)
        self.step_count = 0
        self.state = self.model.initial_state(batch)
        self.forward = self.model.forward
        self.head = self._head
        if compile_scope == "regional":
            self.model.encode = torch.compile(self.model._encode)
            if lstm_impl == "autograd":
                self.model.cell = torch.compile(lstm_cell)
            self.head = torch.compile(self._head)
        elif compile_scope == "full":
            self.forward = torch.compile(self.model.forward)
            self.head = torch.compile(self._head)

    def sample(self, targets):
        """K negative ids, their log expected counts, and the targets' log expected counts."""
        if self.unique:
            ids = torch.multinomial(self.probs, self.num_sampled, replacement=False)
            def log_expected(p):
                return torch.log(-torch.expm1(self.num_tries * torch.log1p(-p)))
        else:
            ids = torch.multinomial(self.probs, self.num_sampled, replacement=True)
            def log_expected(p):
                return torch.log(self.num_sampled * p)
        return ids, log_expected(self.probs[ids]), log_expected(self.probs[targets])

    def _head(self, w_rows, b_rows, top, n_targets, sampled_log_expected, target_log_expected, hits, mask, count):
        hidden = top.reshape(-1, top.shape[-1])
        nll = sampled_softmax_nll(w_rows, b_rows, hidden, n_targets, sampled_log_expected, target_log_expected, hits)
        return masked_loss(nll, mask, count)

    def step(self, batch: dict) -> dict:
        model = self.model
        char_ids, targets, mask = batch["char_ids"], batch["targets"], batch["mask"]
        if not self.config.train.stateful:
            self.state = model.initial_state(char_ids.shape[1])
        count = mask.view(2, -1).sum(1).clamp(min=1.0) if mask is not None else float(targets.numel() // 2)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bfloat16):
            top, new_state = self.forward(char_ids, mask, self.state, True)
        flat_targets = targets.reshape(-1)
        ids, sampled_le, target_le = self.sample(flat_targets)
        all_ids = torch.cat([flat_targets, ids])
        if self.rows:
            uniq, inverse = torch.unique(all_ids, return_inverse=True)
            w_sub = model.softmax_w.detach()[uniq].requires_grad_()
            b_sub = model.softmax_b.detach()[uniq].requires_grad_()
            w_rows, b_rows = F.embedding(inverse, w_sub), b_sub[inverse]
        else:
            w_rows, b_rows = F.embedding(all_ids, model.softmax_w), model.softmax_b[all_ids]
        hits = flat_targets[:, None] == ids[None, :]
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bfloat16):
            loss, per_dir = self.head(w_rows, b_rows, top, flat_targets.numel(), sampled_le, target_le, hits, mask, count)
        loss.backward()
        grads_of = self.dense_params + ([w_sub, b_sub] if self.rows else [])
        clip = self.config.train.clip_norm
        norm = clip_by_global_norm([g.grad for g in grads_of], clip) if clip > 0 else None
        lr = self.lr(self.step_count)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        if self.rows:
            with torch.no_grad():
                for param, acc, sub in ((model.softmax_w, self.acc_w, w_sub), (model.softmax_b, self.acc_b, b_sub)):
                    g = sub.grad
                    if self.config.train.optimizer.name == "adagrad":
                        a = acc[uniq].addcmul_(g, g)
                        acc[uniq] = a
                        param.index_add_(0, uniq, g / a.sqrt(), alpha=-lr)
                    else:
                        param.index_add_(0, uniq, g, alpha=-lr)
        self.optimizer.zero_grad(set_to_none=True)
        self.state = new_state
        self.step_count += 1
        return {"loss": loss.detach(), "per_dir": per_dir.detach(), "grad_norm": norm}


def clip_by_global_norm(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """optax.clip_by_global_norm: scales the gradients in place only when the norm exceeds max_norm."""
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    if norm > max_norm:  # (one host read of a scalar; free on CPU)
        torch._foreach_mul_(grads, max_norm / norm)
    return norm


def to_torch_batch(batch: dict, device: str | torch.device = "cpu") -> dict:
    """throughput.zipf_batch output -> `[2, B, ...]` torch tensors on `device` (mask None when full)."""
    mask = batch["mask"]
    return {
        "char_ids": torch.from_numpy(batch["char_ids"].astype(np.int64)).to(device),
        "targets": torch.from_numpy(batch["targets"].astype(np.int64)).to(device),
        "mask": None if mask.all() else torch.from_numpy(mask.astype(np.float32))[..., None].to(device),
    }


# ----------------------------------------------------------------------------------------------
# --check: the same computation as elmo-jax.
# ----------------------------------------------------------------------------------------------


def load_jax_params(model: TorchBiLM, params) -> None:
    t = lambda a: torch.from_numpy(np.array(a, dtype=np.float32))
    enc = params["encoder"]
    with torch.no_grad():
        model.char_embed.copy_(t(enc["char_embed"]))
        for i in range(len(model.filters)):
            model.conv_w[i].copy_(t(enc[f"W_cnn_{i}"]).permute(2, 1, 0))
            model.conv_b[i].copy_(t(enc[f"b_cnn_{i}"]))
        hw = enc["highway"]
        for k in range(len(model.hw_w)):
            model.hw_w[k].copy_(torch.cat([t(hw[f"W_carry_{k}"]), t(hw[f"W_transform_{k}"])], 1))
            model.hw_b[k].copy_(torch.cat([t(hw[f"b_carry_{k}"]), t(hw[f"b_transform_{k}"])]))
        model.proj_w.copy_(t(enc["W_proj"]))
        model.proj_b.copy_(t(enc["b_proj"]))
        for k in range(model.n_layers):
            lp = params[f"lstm_{k}"]
            if model.lstm_impl == "cudnn":
                for d, lstm in enumerate(model.cudnn_lstms[k]):
                    gates = lambda w: torch.cat([w.chunk(4, dim=-1)[g] for g in TORCH_GATES], dim=-1)  # noqa: E731
                    lstm.weight_ih_l0.copy_(gates(t(lp["W_input"])[d]).t())
                    lstm.weight_hh_l0.copy_(gates(t(lp["W_hidden"])[d]).t())
                    lstm.bias_ih_l0.copy_(gates(t(lp["B"])[d] + model.forget_bias))
                    lstm.weight_hr_l0.copy_(t(lp["W_P"])[d].t())
                continue
            model.w_input[k].copy_(t(lp["W_input"]))
            model.w_hidden[k].copy_(t(lp["W_hidden"]))
            model.lstm_b[k].copy_(t(lp["B"]))
            model.w_p[k].copy_(t(lp["W_P"]))
        model.softmax_w.copy_(t(params["softmax"]["W"]))
        model.softmax_b.copy_(t(params["softmax"]["b"]))


def torch_to_jax_layout(model: TorchBiLM, grads: bool = False) -> dict:
    """The torch model's parameters (their gradients with `grads`) in elmo-jax's flat-key layout."""
    n = lambda x: (x.grad if grads else x).detach().cpu().numpy()
    nf = model.n_filters
    out = {"encoder/char_embed": n(model.char_embed), "encoder/W_proj": n(model.proj_w), "encoder/b_proj": n(model.proj_b)}
    for i in range(len(model.filters)):
        out[f"encoder/W_cnn_{i}"] = n(model.conv_w[i]).transpose(2, 1, 0)
        out[f"encoder/b_cnn_{i}"] = n(model.conv_b[i])
    for k in range(len(model.hw_w)):
        w, b = n(model.hw_w[k]), n(model.hw_b[k])
        out[f"encoder/highway/W_carry_{k}"], out[f"encoder/highway/W_transform_{k}"] = w[:, :nf], w[:, nf:]
        out[f"encoder/highway/b_carry_{k}"], out[f"encoder/highway/b_transform_{k}"] = b[:nf], b[nf:]
    for k in range(model.n_layers):
        if model.lstm_impl == "cudnn":  # back to elmo-jax's gate order; the forget bias is not a parameter
            back = np.argsort(TORCH_GATES)
            gates = lambda w: np.concatenate([np.split(w, 4, axis=-1)[g] for g in back], axis=-1)  # noqa: E731
            lstms = model.cudnn_lstms[k]
            forget = 0.0 if grads else model.forget_bias.cpu().numpy()
            out[f"lstm_{k}/W_input"] = np.stack([gates(n(m.weight_ih_l0).T) for m in lstms])
            out[f"lstm_{k}/W_hidden"] = np.stack([gates(n(m.weight_hh_l0).T) for m in lstms])
            out[f"lstm_{k}/B"] = np.stack([gates(n(m.bias_ih_l0)) for m in lstms]) - forget
            out[f"lstm_{k}/W_P"] = np.stack([n(m.weight_hr_l0).T for m in lstms])
            continue
        out[f"lstm_{k}/W_input"], out[f"lstm_{k}/W_hidden"] = n(model.w_input[k]), n(model.w_hidden[k])
        out[f"lstm_{k}/B"], out[f"lstm_{k}/W_P"] = n(model.lstm_b[k]), n(model.w_p[k])
    out["softmax/W"], out["softmax/b"] = n(model.softmax_w), n(model.softmax_b)
    return out


def _flat(tree, prefix="") -> dict:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict) or hasattr(v, "items"):
            out.update(_flat(v, f"{prefix}{k}/"))
        else:
            out[prefix + k] = np.asarray(v)
    return out


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def jax_reference(config, vocab_size: int, params, np_batch: dict, state_np: list) -> dict:
    """elmo-jax's full-softmax loss of `np_batch` (from the carried states `state_np`), its top
    layer, new states and gradients, and the parameters after one optimizer update."""
    import jax
    import jax.numpy as jnp
    import optax

    from elmo_jax.model import softmax as softmax_lib
    from elmo_jax.model.bilm import bilm_from_config
    from elmo_jax.model.lstm import LSTMState
    from elmo_jax.training import optim

    jmodel = bilm_from_config(config.model, vocab_size)
    inputs = jax.tree.map(jnp.asarray, np_batch)
    mask = inputs["mask"].astype(jnp.float32)
    count = jnp.maximum(mask.sum(axis=(1, 2)), 1.0)
    jstate = [LSTMState(jnp.asarray(c), jnp.asarray(h)) for c, h in state_np]

    def jax_loss(params):
        _, top, new_state = jmodel.apply({"params": params}, inputs, jstate, train=False)
        hidden = top.reshape(-1, top.shape[-1])
        nll = softmax_lib.full_softmax_nll(params["softmax"]["W"], params["softmax"]["b"], hidden,
                                           inputs["targets"].reshape(-1), config.model.softmax.chunk_size)
        loss = 0.5 * ((nll.reshape(mask.shape) * mask).sum(axis=(1, 2)) / count).sum()
        return loss, (new_state, hidden)

    (loss, (new_state, hidden)), grad_tree = jax.value_and_grad(jax_loss, has_aux=True)(params)
    tx, _ = optim.make_optimizer(config.train, 1000)
    updates, _ = tx.update(grad_tree, tx.init(params), params)
    return {"loss": float(loss), "hidden": hidden, "state": new_state, "grads": _flat(grad_tree),
            "params_before": _flat(params), "params_after": _flat(optax.apply_updates(params, updates))}


def compare_with_jax(config, vocab_size: int, impl: str, conv: str, params, np_batch: dict, state_np: list,
                     ref: dict) -> dict:
    """This model (`--lstm=impl --conv=conv`) against `jax_reference`'s `ref`: relative differences
    of the loss, the top layer, the new states, the gradients and one optimizer update."""
    batch_size, p = config.train.batch_size, config.model.width
    tb = to_torch_batch(np_batch)
    trainer = Trainer(config, vocab_size, batch_size, impl, "dense", conv, None)
    model = trainer.model
    load_jax_params(model, params)
    state = [(torch.from_numpy(c.copy()), torch.from_numpy(h.copy())) for c, h in state_np]
    mask = tb["mask"] if tb["mask"] is not None else torch.ones(tb["targets"].shape + (1,))
    top, new_state = model(tb["char_ids"], tb["mask"], state, train=False)
    hidden = top.reshape(-1, p)
    nll = full_softmax_nll(model.softmax_w, model.softmax_b, hidden, tb["targets"].reshape(-1))
    loss, _ = masked_loss(nll, mask, mask.view(2, -1).sum(1).clamp(min=1.0))
    loss.backward()
    loss = float(loss.detach())
    r = {"loss_torch": loss, "loss_jax": ref["loss"], "loss_rel": abs(loss - ref["loss"]) / abs(ref["loss"])}
    r["hidden_rel"] = _rel(hidden.detach().numpy(), ref["hidden"])
    r["state_rel"] = max(max(_rel(c.numpy(), want.c), _rel(h.numpy(), want.h)) for (c, h), want in zip(new_state, ref["state"]))
    tgrads, jgrads = torch_to_jax_layout(model, grads=True), ref["grads"]
    r["grad_rel_max"] = max(_rel(tgrads[k], jgrads[k]) for k in jgrads)
    r["grad_worst"] = max(jgrads, key=lambda k: _rel(tgrads[k], jgrads[k]))
    # One optimizer update from these gradients (clipping + the config's optimizer).
    clip_by_global_norm([q.grad for q in trainer.dense_params], config.train.clip_norm)
    for group in trainer.optimizer.param_groups:
        group["lr"] = trainer.lr(0)
    trainer.optimizer.step()
    tparams, before, after = torch_to_jax_layout(model), ref["params_before"], ref["params_after"]
    r["update_rel_max"] = max(_rel(tparams[k] - before[k], after[k] - before[k]) for k in after)
    r["ok"] = bool(r["loss_rel"] < 1e-4 and r["grad_rel_max"] < 1e-3 and r["state_rel"] < 1e-4)
    return r


def run_check(config, vocab_size: int) -> None:
    import jax
    import jax.numpy as jnp

    from elmo_jax.model import softmax as softmax_lib
    from elmo_jax.model.bilm import bilm_from_config
    from elmo_jax.model.initial_params import init_params

    batch_size, steps, chars = config.train.batch_size, config.train.unroll_steps, config.data.max_chars_per_token
    jmodel = bilm_from_config(config.model, vocab_size)
    params = init_params(jmodel, jax.random.key(config.seed), chars)
    rng = np.random.default_rng(1)
    full_batch = zipf_batch(rng, vocab_size, batch_size, steps, chars)
    # Exercise the mask path: a few padded positions.
    np_batch = jax.tree.map(np.copy, full_batch)
    np_batch["mask"][0, 0, -2:] = False
    np_batch["mask"][1, 1, 1] = False
    d, p = config.model.lstm.dim, config.model.width
    # Carried states and W_P large enough that the cell and projection clips are active.
    state_np = [(3.0 * rng.standard_normal((2, batch_size, d)).astype(np.float32),
                 1.0 * rng.standard_normal((2, batch_size, p)).astype(np.float32)) for _ in range(config.model.lstm.n_layers)]
    params = jax.tree_util.tree_map_with_path(
        lambda path, x: x * 40.0 if "W_P" in jax.tree_util.keystr(path) else x, params
    )
    ref = jax_reference(config, vocab_size, params, np_batch, state_np)
    jhidden = ref["hidden"]
    results = {}
    for impl, conv in (("custom", "unfold"), ("custom", "conv1d"), ("autograd", "unfold")):
        results[f"lstm={impl},conv={conv}"] = compare_with_jax(config, vocab_size, impl, conv, params, np_batch, state_np, ref)
    # cuDNN's LSTM has neither clipping nor a mask: the same computation without them.
    unclipped = config.copy_and_resolve_references()
    unclipped.model.lstm.cell_clip = unclipped.model.lstm.proj_clip = None
    unclipped_ref = jax_reference(unclipped, vocab_size, params, full_batch, state_np)
    results["lstm=cudnn,conv=unfold (no clips, no mask)"] = compare_with_jax(
        unclipped, vocab_size, "cudnn", "unfold", params, full_batch, state_np, unclipped_ref)
    ok = all(r["ok"] for r in results.values())
    tb = to_torch_batch(np_batch)

    # The sampled softmax head against elmo-jax's, with the same negatives.
    trainer = Trainer(config, vocab_size, batch_size, "custom", "dense", "unfold", None)
    load_jax_params(trainer.model, params)
    targets = tb["targets"].reshape(-1)
    ids, sle, tle = trainer.sample(targets)
    hidden = torch.from_numpy(np.array(jhidden))
    all_ids = torch.cat([targets, ids])
    w, b = trainer.model.softmax_w.detach(), trainer.model.softmax_b.detach()
    tnll = sampled_softmax_nll(w[all_ids], b[all_ids], hidden, targets.numel(), sle, tle, targets[:, None] == ids[None, :])
    num_tries = softmax_lib.unique_sampling_tries(vocab_size, config.model.softmax.n_negative_samples)
    jp = softmax_lib.log_uniform_probs(jnp.asarray(ids.numpy()), vocab_size)
    jle = jnp.log(-jnp.expm1(num_tries * jnp.log1p(-jp)))
    jpt = softmax_lib.log_uniform_probs(jnp.asarray(targets.numpy()), vocab_size)
    jtle = jnp.log(-jnp.expm1(num_tries * jnp.log1p(-jpt)))
    jnll = softmax_lib.sampled_softmax_nll(params["softmax"]["W"], params["softmax"]["b"], jhidden,
                                           jnp.asarray(targets.numpy()), jnp.asarray(ids.numpy()), jle, jtle)
    results["sampled_softmax_nll_rel"] = _rel(tnll.numpy(), jnll)
    ok &= results["sampled_softmax_nll_rel"] < 1e-4

    # Full train steps (sampled softmax, dropout): --softmax_update=rows gives the dense update.
    if config.train.optimizer.name in ("adagrad", "sgd"):
        after = {}
        for update in ("dense", "rows"):
            torch.manual_seed(0)
            trainer = Trainer(config, vocab_size, batch_size, "custom", update, "unfold", None)
            load_jax_params(trainer.model, params)
            losses = [float(trainer.step(tb)["loss"]) for _ in range(3)]
            after[update] = (losses, torch_to_jax_layout(trainer.model))
        results["train_losses_dense"], results["train_losses_rows"] = after["dense"][0], after["rows"][0]
        results["rows_vs_dense_params_rel_max"] = max(_rel(after["rows"][1][k], after["dense"][1][k]) for k in after["dense"][1])
        ok &= results["rows_vs_dense_params_rel_max"] < 1e-4
    results["ok"] = bool(ok)
    print(json.dumps(results, indent=1))
    if not ok:
        raise SystemExit("check FAILED")


def main(argv: list[str]) -> None:
    del argv
    malloc_tuned = host_memory.reuse_freed_memory() if FLAGS.malloc_tuning else False
    torch.set_num_threads(FLAGS.threads or os.cpu_count())
    config = FLAGS.config
    if FLAGS.check:
        run_check(config, FLAGS.vocab_size or 60)
        return
    vocab_size = FLAGS.vocab_size or 793471
    batch, steps = config.train.batch_size, config.train.unroll_steps
    chars = config.data.max_chars_per_token
    lstm_impl = FLAGS.lstm
    scope = FLAGS.compile_scope if FLAGS.compile else None
    torch.manual_seed(config.seed)
    device = torch.device(FLAGS.device)
    trainer = Trainer(config, vocab_size, batch, lstm_impl, FLAGS.softmax_update, FLAGS.conv, scope, device)
    if not config.model.softmax.sampled:
        raise NotImplementedError("only the sampled softmax is benchmarked")
    rng = np.random.default_rng(0)
    batches = [to_torch_batch(zipf_batch(rng, vocab_size, batch, steps, chars), device) for _ in range(4)]
    # A step's time ends when the device has finished it (CUDA runs asynchronously).
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)

    start = time.perf_counter()
    for i in range(FLAGS.warmup):
        trainer.step(batches[i % 4])
    sync()
    warmup_s = time.perf_counter() - start
    times = []
    for i in range(FLAGS.steps):
        start = time.perf_counter()
        metrics = trainer.step(batches[i % 4])
        sync()
        times.append(time.perf_counter() - start)
    if device.type == "cuda":  # as throughput.py: n = 8192 and 20 products on accelerators
        devices, peak = f"1 x {torch.cuda.get_device_name(device)}", matmul_peak_gflops(
            8192, 20, device, torch.bfloat16 if trainer.bfloat16 else torch.float32)
    else:
        devices, peak = f"1 x cpu ({torch.get_num_threads()} threads)", matmul_peak_gflops(
            dtype=torch.bfloat16 if trainer.bfloat16 else torch.float32)
    record = throughput_record(
        config, config_flags.get_config_filename(FLAGS["config"]), vocab_size, times, devices=devices, peak_gflops=peak,
    )
    print(json.dumps({
        **record,
        "framework": f"pytorch {torch.__version__}",
        "mode": "compile" if FLAGS.compile else "eager",
        "lstm": lstm_impl,
        "conv": FLAGS.conv,
        "malloc_tuning": malloc_tuned,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "softmax_update": FLAGS.softmax_update,
        "optimizer": f"{config.train.optimizer.name} ({trainer.opt_kind})",
        "warmup_s": round(warmup_s, 1),
        "final_loss": round(float(metrics["loss"]), 4),
    }))


if __name__ == "__main__":
    app.run(main)
