"""What the paper reports (Redhardt, Akram, Schug 2025; ../shared/papers/scaling_compgen.md),
for the sweep report to set beside the numbers of a run."""

TITLE = "Scaling can lead to compositional generalization (Redhardt, Akram, Schug, NeurIPS 2025)"

# Table of the paper at M=16, K=3, frac_ood=0.25: our encoding name -> (the paper's name,
# task decoder R^2, input decoder R^2, OOD R^2). The paper's "language" is the reference's
# integer-vector encoding, our `tokens`.
ENCODING_TABLE = {
    "identity": ("identity", 0.95, 1.00, 1.00),
    "orthogonal": ("orthogonal", 0.96, 1.00, 1.00),
    "tokens": ("language", 0.99, 1.00, 1.00),
    "invertible": ("invertible NN", 0.94, 0.56, 0.95),
    "interval_shuffle": ("interval shuffle", 0.96, 0.73, 0.98),
    "few_shot": ("few-shot", 0.90, -0.23, 0.97),
}
TABLE_SETTING = {"task.num_modules": 16, "task.max_hotness": 3, "frac_ood": 0.25}
# The model of the paper's table (its default student); the report uses it when swept.
TABLE_MODEL = {"student.mlp.width": 1024, "student.mlp.depth": 4}

CLAIMS = {
    "data_scaling": "An MLP trained on a subset of module combinations generalizes to held-out "
                    "ones once it sees enough of them: OOD performance rises monotonically with "
                    "the number of training tasks, towards R^2 = 1, for every (M, K).",
    "model_size": "OOD performance rises with the student's width and depth, for all six task "
                  "encodings.",
    "encodings": "At M=16, K=3, frac_ood=0.25 every encoding generalizes (OOD R^2 0.95-1.00), "
                 "even those from which z is not linearly decodable (input decoder R^2 0.56 "
                 "for the invertible NN, -0.23 for few-shot); the task constituents are "
                 "linearly decodable from the hidden layers (task decoder R^2 0.90-0.99).",
    "decodability": "When a network generalizes compositionally, the task constituents are "
                    "linearly decodable from its hidden activations: decodability correlates "
                    "strongly with OOD performance across runs.",
    "scaling_law": "With a balanced (`equal`) support, the number of training tasks needed to "
                   "reach a given OOD R^2 grows sub-exponentially: far more slowly than the total "
                   "number of tasks T, so the fraction of tasks needed shrinks as T grows; MLPs "
                   "and transformers alike.",
    "transformer_vs_mlp": "Transformers are more data-efficient than MLPs: at a matched "
                          "parameter count they need fewer training tasks for the same OOD "
                          "performance.",
    "task_support": "Generalization needs a compositional and connected training support: "
                    "non-compositional, disconnected and rare-module (unpopular) supports "
                    "clearly hurt; over-represented (popular) modules do not.",
}
