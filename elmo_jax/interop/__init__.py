"""Interoperability with other ELMo implementations: bilm-tf / AllenNLP weight files, ELMoForManyLangs' PyTorch
pickles."""
