"""What a biLM's layers know: linear probes of token tasks on each layer's frozen representations
(`run.probe`), beside word-type baselines and a random-init control (`elmo-probe`)."""
