// RUN: sl-opt %s -split-input-file --sl-bind-inputs="inputs=attention_mask only-input-ids" -verify-diagnostics

// expected-error @+1 {{sl-bind-inputs: input 'token_type_ids' has no value the pipeline can give it: training and generation feed only input_ids (and bind attention_mask, position_ids and past_key_values.*); export the model without it}}
func.func @other_input(%ids: tensor<?x?xi64> {sl.name = "input_ids"}, %t: tensor<?x?xi64> {sl.name = "token_type_ids"}) -> tensor<?x?xi64> {
  return %t : tensor<?x?xi64>
}

// -----

// expected-error @+1 {{sl-bind-inputs: 'attention_mask' must be [batch, length], got 'tensor<?xi64>'}}
func.func @bad_mask(%ids: tensor<?x?xi64> {sl.name = "input_ids"}, %m: tensor<?xi64> {sl.name = "attention_mask"}) -> tensor<?xi64> {
  return %m : tensor<?xi64>
}
