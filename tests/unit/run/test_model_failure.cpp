// A model's own exception, told as the model's (train/model_failure.hpp): its message and the
// first frames of its TorchScript traceback, from the text LibTorch 1.13 gives.
#include <catch2/catch.hpp>

#include "expctl/train/model_failure.hpp"

using namespace expctl;

namespace {

// What LibTorch 1.13 says for a scripted nn.TransformerEncoder evaluated under CPU autocast
// (tests/tools/model_zoo.py's transformer.pt), serialized code shortened.
const char* const k_transformer_error =
    "The following operation failed in the TorchScript interpreter.\n"
    "Traceback of TorchScript, serialized code (most recent call last):\n"
    "  File \"code/__torch__.py\", line 14, in forward\n"
    "    _0 = (encoder).forward((inp).forward(x, ), None, None, )\n"
    "          ~~~~~~~~~~~~~~~~ <--- HERE\n"
    "    _1 = (head).forward(torch.mean(_0, [1]), )\n"
    "\n"
    "Traceback of TorchScript, original code (most recent call last):\n"
    "  File \"/work/tests/tools/model_zoo.py\", line 67, in forward\n"
    "    def forward(self, x):\n"
    "        return self.head(self.encoder(self.inp(x)).mean(1))\n"
    "                         ~~~~~~~~~~~~ <--- HERE\n"
    "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/transformer.py\", line 280, in forward\n"
    "    \n"
    "        for mod in self.layers:\n"
    "            output = mod(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask_for_layers)\n"
    "                     ~~~ <--- HERE\n"
    "    \n"
    "        if convert_to_nested:\n"
    "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/transformer.py\", line 506, in forward\n"
    "    \n"
    "            if not why_not_sparsity_fast_path:\n"
    "                return torch._transformer_encoder_layer_fwd(\n"
    "                       ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
    "                    src,\n"
    "                    self.self_attn.embed_dim,\n"
    "RuntimeError: expected scalar type BFloat16 but found Float\n";

}  // namespace

TEST_CASE("model failure: TorchScript's text gives the model's message and the original code's frames",
          "[run][model_failure]") {
  const auto parsed = train::parse_model_error(k_transformer_error);
  CHECK(parsed.message == "RuntimeError: expected scalar type BFloat16 but found Float");
  REQUIRE(parsed.frames.size() == 3);
  CHECK(parsed.frames[0] ==
        "File \"/work/tests/tools/model_zoo.py\", line 67, in forward: return "
        "self.head(self.encoder(self.inp(x)).mean(1))");
  CHECK(parsed.frames[2] ==
        "File \"/usr/lib/python3/dist-packages/torch/nn/modules/transformer.py\", line 506, in forward: return "
        "torch._transformer_encoder_layer_fwd(");
  const auto text = train::model_failure_text("/m/transformer.pt", "evaluation", 20, parsed, 2);
  CHECK(text ==
        "/m/transformer.pt failed in evaluation at step 20: RuntimeError: expected scalar type BFloat16 but found "
        "Float\n  TorchScript traceback (most recent call last):\n    " +
            parsed.frames[0] + "\n    " + parsed.frames[1] + "\n    ... 1 more");
}

TEST_CASE(
    "model failure: an exception without a traceback is its first line, and a file's serialized code serves "
    "when it has no original code",
    "[run][model_failure]") {
  const auto plain = train::parse_model_error(
      "mat1 and mat2 shapes cannot be multiplied (2x8 and 784x64)\n"
      "Exception raised from meta at ../aten/src/ATen/native/Linear.cpp\n");
  CHECK(plain.message == "mat1 and mat2 shapes cannot be multiplied (2x8 and 784x64)");
  CHECK(plain.frames.empty());
  CHECK(train::model_failure_text("cnn (100 parameters)", "the training step", 3, plain) ==
        "cnn (100 parameters) failed in the training step at step 3: mat1 and mat2 shapes cannot be multiplied (2x8 "
        "and 784x64)");
  const auto serialized = train::parse_model_error(
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript, serialized code (most recent call last):\n"
      "  File \"code/__torch__.py\", line 38, in forward\n"
      "        ops.prim.RaiseException(_1, \"builtins.RuntimeError\")\n"
      "        ~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
      "builtins.RuntimeError: boom\n");
  CHECK(serialized.message == "builtins.RuntimeError: boom");
  REQUIRE(serialized.frames.size() == 1);
  CHECK(serialized.frames[0] ==
        "File \"code/__torch__.py\", line 38, in forward: ops.prim.RaiseException(_1, \"builtins.RuntimeError\")");
  CHECK(train::parse_model_error("").message.empty());
}
