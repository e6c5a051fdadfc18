"""Built-in offline agents. They act only through tool blocks, like an LLM."""
