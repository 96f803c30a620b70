"""A Llama config small enough that a deployment search or a serving sweep over it
runs in seconds: the model the deployment and serving-sweep suites write as
config.json."""

TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 1000,
              "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
