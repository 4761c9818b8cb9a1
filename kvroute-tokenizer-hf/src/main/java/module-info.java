/**
 * Local Hugging Face tokenizers (DJL's native tokenizers or a pure-Java byte-level BPE) and chat
 * templates, as {@link io.kvroute.scoring.Tokenizer}s.
 */
module io.kvroute.tokenizer.hf {
  requires transitive io.kvroute.scoring;
  requires transitive micrometer.core;
  requires transitive com.fasterxml.jackson.databind;
  requires ai.djl.api;
  requires ai.djl.tokenizers;
  requires org.slf4j;

  exports io.kvroute.tokenizer.hf;
}
