// Placeholder until the layer's first source lands (keeps the library non-empty).
