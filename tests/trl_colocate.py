"""GRPOLambdaTrainer with the paper grid's RL generation settings (TRL's vLLM, colocated) on a CPU.

Run by tests/test_vllm.py in the vLLM environment. Prints ``engine: <class>`` once TRL has built its
colocated engine, then trains one step, whose first act is to copy the policy's weights into that engine.

    python tests/trl_colocate.py MODEL_DIR OUT_DIR
"""

import sys


def main() -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer

    from grpo_lambda.trainer import GRPOLambdaTrainer
    from grpo_lambda.trainer_config import GRPOLambdaConfig
    from grpo_lambda.variants import variant_config_kwargs

    model, out = sys.argv[1], sys.argv[2]
    args = GRPOLambdaConfig(
        output_dir=out, use_cpu=True, bf16=False, report_to="none", save_strategy="no", max_steps=1,
        per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
        use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3, vllm_max_model_length=128,
        **variant_config_kwargs({"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace",
                                 "form": "absolute", "eps": 1e-7}))
    trainer = GRPOLambdaTrainer(
        model=model, reward_funcs=lambda completions, **kwargs: [float(len(c)) for c in completions], args=args,
        train_dataset=Dataset.from_dict({"prompt": ["1+1=?"] * 8}), processing_class=AutoTokenizer.from_pretrained(model))
    print(f"engine: {type(trainer.vllm_generation.llm).__name__}", flush=True)
    trainer.train()
    print("trained one step", flush=True)


if __name__ == "__main__":
    main()
