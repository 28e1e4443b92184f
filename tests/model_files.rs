//! How the default model is found and verified. One test in its own binary, because it sets
//! `MEMLANE_MODELS_DIR` for the process.

use memlane::MiniLm;

#[test]
fn missing_or_altered_model_files_are_refused_with_a_way_out() {
    let real = MiniLm::default_dir();
    let dir = tempfile::tempdir().unwrap();
    // This binary runs this one test only, so no other thread reads the environment.
    std::env::set_var("MEMLANE_MODELS_DIR", dir.path());

    let err = MiniLm::load_default().unwrap_err();
    assert_eq!(err.status(), 503);
    assert!(err.detail().contains("fetch-models.sh"), "{}", err.detail());

    let copy = dir.path().join("all-minilm-l6-v2");
    std::fs::create_dir_all(&copy).unwrap();
    for name in ["model.safetensors", "tokenizer.json", "config.json"] {
        std::fs::copy(real.join(name), copy.join(name)).unwrap();
    }
    assert!(MiniLm::load_default().is_ok(), "verified copies load");

    let mut tokenizer = std::fs::read(copy.join("tokenizer.json")).unwrap();
    tokenizer[100] ^= 1;
    std::fs::write(copy.join("tokenizer.json"), tokenizer).unwrap();
    let err = MiniLm::load_default().unwrap_err();
    assert_eq!(err.status(), 503);
    assert!(err.detail().contains("SHA-256"), "{}", err.detail());

    assert_eq!(
        MiniLm::from_dir(dir.path().join("nowhere"))
            .unwrap_err()
            .status(),
        503
    );
}
