"""The project's own training workdirs, read without training: the config a run was trained with
(`saved_config`), its checkpoints (`checkpoints`) and its run (`runs`: config, params, vocabulary).
bilm-tf/AllenNLP files are elmo_jax/interop/'s."""
