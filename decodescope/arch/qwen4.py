"""Qwen4-Exp (model_type qwen4_exp, its language model qwen4_exp_text; released as
Qwen/Qwen3.8-Flash-Next): Qwen3.5-MoE's decoder (Gated DeltaNet, gated attention, routed
experts with a gated shared expert, an MTP module) with three additions, shapes as
transformers 5.24's models/qwen4_exp/modular_qwen4_exp.py builds them:

- hyper-connections: hc_count copies of the residual stream; each sub-layer reads them through a
  grouped norm and a low-rank input mixer (Qwen4ExpTextGatedResidual) and writes its output back
  with one weight per copy. They replace every layer norm and the final norm.
- per-layer embeddings (PLE) on the one-indexed ple_layer_ids: hashed bigram / trigram tables
  gathered a row per head per token, projected, gated by the streams and passed through a
  dilated depthwise conv (Qwen4ExpTextPLELayer).
- QSA: on the attention layers an indexer scores pooled keys, one per indexer_compress_ratio
  tokens, and the attention reads only the indexer_budget tokens of the blocks it picks
  (Qwen4ExpTextQSAIndexer).

Engine facts (what is cached, replicated or sharded) are SGLang's, whose python/sglang/srt/
models/qwen4_exp.py, qwen4_exp_mtp.py, layers/hyperconnection.py and mem_cache/qsa_kv_pool.py
(sgl-project/sglang) serve the release."""

from dataclasses import asdict, dataclass

from decodescope.arch.arch import MTPModule
from decodescope.arch.blocks import Attention, GatedDeltaNet, Layer, StateMixer, Tensor
from decodescope.arch.build import _gdn, attention, moe
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError

# kernels a hyper-connection adds to each sub-layer: the low-rank mix of the streams and the
# combine that writes the output back (SGLang's hc_mix and hc_combine); its grouped norm takes
# the place of the block's own pre-norm
HC_KERNELS = 2
# SGLang keeps the pooled index keys in bf16 whatever the KV cache's dtype (QSATokenToKVPool:
# "Compressed keys stay BF16 in the pool even under SGLANG_QSA_USE_FP8_INDEXER")
INDEX_KEY_BYTES = 2
TOKEN_ID_BYTES = 8  # the n-gram context is token ids in int64 (transformers' cache and SGLang's pool)
QSA_FIELDS = ("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio")
LAYER_WORDS = ("linear_attention", "full_attention", "indexed_attention")  # the release writes full_attention
# Miller-Rabin with these bases decides every n below 3.3e24, far above ngram_vocab_size_base's
# ceiling (2^40, fields.INT_RANGES)
PRIME_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
NGRAM_HEADS_MAX = 1024  # n-gram heads over all PLE layers (the release has 16): bounds the prime search


def hyper_connection(prefix: str, hc: int, h: int, rank: int, inject: bool = True) -> tuple[Tensor, ...]:
    """One Qwen4ExpTextGatedResidual: a norm per stream (hc x h weights), the low-rank input mixer
    down [rank, hc*h] and up [hc*h, rank], and (`inject`) block_inject_weight [hc, hc*h], the
    weight of the sub-layer's output in each stream. Every TP rank holds them whole and SGLang
    keeps them in bf16 (nn.Linear of params_dtype): not quantised, so linear=False; their
    matmuls' FLOPs (~2 x 6.6 M per token per sub-layer in the release) are left out."""
    ts = (Tensor(f"{prefix}.hc_norm", (hc * h,), "rep", linear=False),
          Tensor(f"{prefix}.input_mix_weight_down", (rank, hc * h), "rep", linear=False),
          Tensor(f"{prefix}.input_mix_weight_up", (hc * h, rank), "rep", linear=False))
    return ts + ((Tensor(f"{prefix}.block_inject_weight", (hc, hc * h), "rep", linear=False),) if inject else ())


def _no_input_norm(tensors: list[Tensor]) -> list[Tensor]:
    # the attention hyper-connection's grouped norm is the sub-layer's input norm
    return [t for t in tensors if t.name != "input_layernorm"]


@dataclass(frozen=True)
class HCGatedDeltaNet(GatedDeltaNet):
    """Qwen3.5's Gated DeltaNet without an input norm; its kernels include both sub-layers'
    hyper-connections (the MoE is the shared class)."""
    kernels = GatedDeltaNet.kernels + 2 * HC_KERNELS

    def tensors(self) -> list[Tensor]:
        return _no_input_norm(super().tensors())


@dataclass(frozen=True)
class HCAttention(Attention):
    """Qwen3.5's gated attention (per-head q/k norms) without an input norm: the dense layer
    SGLang builds where a config names no indexer (is_qwen_qsa False)."""
    kernels = Attention.kernels + 2 * HC_KERNELS

    def tensors(self) -> list[Tensor]:
        return _no_input_norm(super().tensors())


@dataclass(frozen=True)
class QSAAttention(HCAttention):
    """Qwen Sparse Attention. The indexer projects index_heads query heads and ONE key head of
    index_dim (index_qk_proj, replicated on every TP rank), averages the keys of each complete
    block of `ratio` tokens into one pooled key, scores the pooled keys and keeps the top
    budget / ratio blocks; attention reads the K/V of their tokens and of the incomplete last
    block. The cache keeps every token's K/V and one pooled key per block (SGLang's
    QSATokenToKVPool; the pending block's raw keys sit in a small per-request ring, not counted)."""
    index_heads: int = 0
    index_dim: int = 0
    budget: int = 0  # indexer_budget: tokens of complete blocks a query attends to
    ratio: int = 1  # indexer_compress_ratio: tokens per pooled key
    kernels = HCAttention.kernels + 4  # index projection + norm + rope, block scores, top-k, pooling

    def tensors(self) -> list[Tensor]:
        h, i = self.hidden_size, self.index_dim
        return super().tensors() + [Tensor("indexer.index_qk_proj", ((self.index_heads + 1) * i, h), "rep"),
                                    Tensor("indexer.q_layernorm", (i,), "rep", linear=False),
                                    Tensor("indexer.k_layernorm", (i,), "rep", linear=False)]

    def attended(self, context: float) -> float:
        """Tokens one query reads the K/V of: the picked blocks plus the incomplete last one."""
        return min(context // self.ratio, self.budget // self.ratio) * self.ratio + context % self.ratio

    def kv_bytes_per_token(self, kv_heads: int, dtype_bytes: float) -> float:
        # K and V of every token, a pooled key (replicated) per `ratio` tokens
        return super().kv_bytes_per_token(kv_heads, dtype_bytes) + self.index_dim * INDEX_KEY_BYTES / self.ratio

    def kv_read_bytes(self, context: int, kv_heads: int, dtype_bytes: float) -> float:
        """The attended tokens' K and V, every pooled key (the indexer scores them all)."""
        kv = super().kv_bytes_per_token(kv_heads, dtype_bytes)
        return self.attended(context) * kv + context // self.ratio * self.index_dim * INDEX_KEY_BYTES

    def attention_flops_per_token(self, heads: float, context: int) -> float:
        # the indexer runs whole on every rank: its heads x index_dim against each pooled key
        index = 2 * self.index_heads * self.index_dim * (context // self.ratio)
        return super().attention_flops_per_token(heads, self.attended(context)) + index


@dataclass(frozen=True)
class PLEConv(StateMixer):
    """A layer's per-layer embedding after its table gather: key_proj [hc*h, E] and value_proj
    [h, E] from the gathered rows, grouped norms of the key, the streams (the query) and the gated
    value, and a depthwise conv of ple_conv_kernel_size taps dilated by ngram_size over the hc*h
    channels. Per request it keeps the conv window, (taps - 1) x dilation inputs per channel, and
    the last ngram_size - 1 token ids (transformers' conv states 1 and 2). SGLang runs it whole on
    every TP rank (ReplicatedLinear, all channels): neither weights nor state split."""
    hidden_size: int
    hc_count: int
    embed_dim: int  # ple_embed_dim
    conv_kernel: int  # ple_conv_kernel_size
    ngram_size: int  # the conv's dilation, and one more than the token ids kept
    state_dtype_bytes: int = 2  # the conv window in the activation dtype (bf16)
    kernels = 6  # hash, gather, key/value GEMM, norms + gate, conv, add

    @property
    def channels(self) -> int:
        return self.hc_count * self.hidden_size

    def tensors(self) -> list[Tensor]:
        c, e = self.channels, self.embed_dim
        return [Tensor("ple.key_proj", (c, e), "rep"), Tensor("ple.value_proj", (self.hidden_size, e), "rep"),
                *(Tensor(f"ple.{n}", (c,), "rep", linear=False) for n in ("norm_key", "norm_query", "norm_conv")),
                Tensor("ple.conv1d", (c, self.conv_kernel), "rep", linear=False)]

    def state_bytes(self, tp: int) -> float:
        """One request's conv window and n-gram context, on every GPU."""
        window = (self.conv_kernel - 1) * self.ngram_size
        return self.channels * window * self.state_dtype_bytes + (self.ngram_size - 1) * TOKEN_ID_BYTES


@dataclass(frozen=True)
class WithPLE:
    """The mixer of a PLE layer: its Gated DeltaNet and, beside it, the PLE (both keep a state).
    As for Falcon-H1's parallel mixer, decodescope.model charges one more allreduce per pass for
    it (`reductions`): SGLang's vocab-parallel n-gram table sums its gathered rows over TP (VocabParallelEmbedding),
    [tokens, ple_embed_dim] in bf16, charged at hidden_size (ple_embed_dim's default and the
    release's value)."""
    mixer: HCGatedDeltaNet
    ple: PLEConv
    reductions = 2  # TP allreduces: the Gated DeltaNet's output and the gathered n-gram rows

    @property
    def parts(self) -> tuple[HCGatedDeltaNet, PLEConv]:
        return self.mixer, self.ple

    @property
    def kernels(self) -> int:
        return self.mixer.kernels + self.ple.kernels

    @property
    def hidden_size(self) -> int:
        return self.mixer.hidden_size

    # the head counts tensor parallelism must divide (decodescope.model.deployment)
    @property
    def linear_num_key_heads(self) -> int:
        return self.mixer.linear_num_key_heads

    @property
    def linear_num_value_heads(self) -> int:
        return self.mixer.linear_num_value_heads

    def tensors(self) -> list[Tensor]:
        return self.mixer.tensors() + self.ple.tensors()


def _is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin (PRIME_BASES): transformers' trial division, in microseconds."""
    if n < 2:
        return False
    for p in PRIME_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in PRIME_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def ngram_tables(f: Fields, ple_layers: list[int], embed_dim: int) -> list[Tensor]:
    """One n-gram table per PLE layer, as Qwen4ExpTextNGramEmbedding sizes it: (ngram_size - 1) x
    heads_per_ngram heads of embed_dim / heads columns; head j of the k-th PLE layer hashes into
    the (k x heads + j + 1)-th prime from ngram_vocab_size_base up, the heads' rows stacked and
    padded to a multiple of make_ngram_vocab_size_divisible_by."""
    heads = (f.get("ngram_size", default=3) - 1) * f.get("heads_per_ngram", default=8)
    base = f.get("ngram_vocab_size_base", default=20_000_000)
    pad = f.get("make_ngram_vocab_size_divisible_by", default=128)
    if embed_dim % heads or heads * len(ple_layers) > NGRAM_HEADS_MAX:
        raise DecodescopeError(f"{f.source}: ple_embed_dim {embed_dim} over {heads} n-gram heads x "
                               f"{len(ple_layers)} PLE layers", "ple_embed_dim is a multiple of the heads "
                               f"(ngram_size - 1) x heads_per_ngram, at most {NGRAM_HEADS_MAX} heads in all")
    tables, prime = [], base - 1
    for i in ple_layers:
        rows = 0
        for _ in range(heads):
            prime += 1
            while not _is_prime(prime):
                prime += 1
            rows += prime
        tables.append(Tensor(f"layers.{i}.ple.ngram_embedding", (-(-rows // pad) * pad, embed_dim // heads),
                             "vocab", linear=False))
    return tables


def _layer_types(f: Fields, n: int) -> list[str]:
    """Each layer's kind, "linear_attention" or "attention" (indexed or dense): layer_types, else
    every full_attention_interval-th layer attends (Qwen4ExpTextConfig.__post_init__, interval 4)."""
    if f.get("layer_types") is not None:
        words = per_layer_words(f, "layer_types", n, LAYER_WORDS)
    else:
        every = f.get("full_attention_interval", default=4)
        words = ["attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]
    return ["linear_attention" if w == "linear_attention" else "attention" for w in words]


def _attention(f: Fields) -> HCAttention:
    """QSA where the config sets the indexer_* fields (all five, as transformers requires),
    else the dense gated attention SGLang builds without them."""
    dense = attention(f, attn_output_gate=True, qk_norm=True)
    given = [k for k in QSA_FIELDS if f.get(k) is not None]
    if not given:
        return HCAttention(**asdict(dense))
    heads, kv, dim, budget, ratio = (f.need(k, "QSA sparse attention") for k in QSA_FIELDS)
    if kv != 1 or budget % ratio:
        raise DecodescopeError(f"{f.source}: indexer_kv_heads {kv}, indexer_budget {budget}, "
                               f"indexer_compress_ratio {ratio}",
                               "QSA has one index key head and a budget that is a multiple of the ratio")
    return QSAAttention(**asdict(dense), index_heads=heads, index_dim=dim, budget=budget, ratio=ratio)


def _ple_layers(f: Fields, kinds: list[str]) -> list[int]:
    """The PLE layers, zero-indexed, from the one-indexed ple_layer_ids (Gated DeltaNet layers only,
    as transformers' validate_architecture requires)."""
    ids = sorted(set(f.list_("ple_layer_ids", int) or []))
    if any(not 1 <= i <= len(kinds) or kinds[i - 1] != "linear_attention" for i in ids):
        raise DecodescopeError(f"{f.source}: ple_layer_ids {ids} must name Gated DeltaNet layers, one-indexed "
                               f"(1 to {len(kinds)})", "fix ple_layer_ids")
    return [i - 1 for i in ids]


def _mtp(f: Fields, layer: Layer, hc: int, mixer: tuple[Tensor, ...]) -> list[MTPModule]:
    """SGLang's Qwen4ExpForCausalLMMTP (hc_count > 1): the embedding through pre_fc_norm_embedding
    and fc_embedding [h, h], each stream of the target's last hidden state through
    pre_fc_norm_hidden (hc*h) and one shared fc_hidden [h, h], one attention layer without PLE,
    and the module's own hyper_connection_mixer; it shares the embedding and the LM head
    (mtp_use_dedicated_embeddings false in the release)."""
    h = f.need("hidden_size")
    extra = (Tensor("fc_embedding", (h, h), "rep"), Tensor("fc_hidden", (h, h), "rep"),
             Tensor("pre_fc_norm_embedding", (h,), "rep", linear=False),
             Tensor("pre_fc_norm_hidden", (hc * h,), "rep", linear=False)) + mixer
    return [MTPModule(layer, extra)] * (f.get("mtp_num_hidden_layers") or 0)


def _notes(f: Fields, attn: HCAttention, tables: list[Tensor], embed: int) -> tuple[str, ...]:
    notes = [f"QSA: a query reads the K/V of {attn.budget} tokens (and of the incomplete last block) and every "
             f"pooled index key, one per {attn.ratio} tokens, cached in bf16 as SGLang does"
             if isinstance(attn, QSAAttention) else
             "no indexer_* fields: the attention layers are dense (SGLang builds no indexer without them)"]
    if tables:
        rows, width = sum(t.shape[0] for t in tables), tables[0].shape[1]
        heads = embed // width
        notes.append(f"PLE n-gram tables: {rows:,} rows of {width}, held where the embedding is (vocab-parallel); "
                     f"each token gathers {heads} rows per PLE layer ({heads * width * 2:,} B in bf16), not charged "
                     "beside the GBs of weights a pass reads; the TP allreduce summing the gathered rows is, once per PLE layer")
    if f.get("ple_offload_embedding"):
        notes.append("ple_offload_embedding: the engine keeps the n-gram tables in host memory (SGLang "
                     "Qwen4ExpPinnedHostEmbedding); decodescope still counts them on the GPU")
    if f.get("ple_embedding_dtype") == "float8_e4m3fn":
        notes.append("ple_embedding_dtype float8_e4m3fn: SGLang holds the n-gram tables in 1 byte a value; "
                     "decodescope counts them in 16 bits")
    if f.get("mtp_num_hidden_layers"):
        notes.append("MTP module as SGLang's Qwen4ExpForCausalLMMTP builds it (transformers loads no mtp.* weights)")
    return tuple(notes)


def build_qwen4_exp(f: Fields):
    """Qwen4-Exp's language model: per layer a Gated DeltaNet (with the PLE on ple_layer_ids) or a
    QSA / dense gated attention, routed experts with a gated shared expert, two hyper-connections;
    the model's hyper_connection_mixer (no final norm) rides on the last layer."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    hc, rank = f.get("hc_count", default=4), f.get("hc_lowrank", default=320)
    kinds = _layer_types(f, n)
    ple_at = _ple_layers(f, kinds)
    embed = f.get("ple_embed_dim", default=h)
    tables = ngram_tables(f, ple_at, embed) if ple_at else []
    gdn, attn = HCGatedDeltaNet(**asdict(_gdn(f))), _attention(f)
    ple = PLEConv(h, hc, embed, f.get("ple_conv_kernel_size", default=4), f.get("ngram_size", default=3))
    mlp = moe(f, shared_expert_intermediate_size=f.get("shared_expert_intermediate_size", default=512),
              shared_expert_gate=True, norm=False)
    hcs = hyper_connection("attn_hyper_connection", hc, h, rank) + hyper_connection("mlp_hyper_connection", hc, h, rank)
    mixer = hyper_connection("hyper_connection_mixer", hc, h, rank, inject=False)
    layers = []
    for i, kind in enumerate(kinds):
        m = attn if kind == "attention" else WithPLE(gdn, ple) if i in ple_at else gdn
        label = "sparse_attention" if isinstance(m, QSAAttention) else kind
        layers.append(Layer(label, m, mlp, hcs + (mixer if i == n - 1 else ())))
    mtp_layer = Layer("sparse_attention" if isinstance(attn, QSAAttention) else "attention", attn, mlp, hcs)
    return layers, _mtp(f, mtp_layer, hc, mixer), _notes(f, attn, tables, embed), tables
