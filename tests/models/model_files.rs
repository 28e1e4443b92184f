//! How the pinned model is found and verified in a model cache.

use memlane::ErrorKind;
use memlane::MiniLm;

#[test]
fn missing_or_altered_model_files_are_refused_with_a_way_out() {
    let real = MiniLm::default_dir();
    let dir = tempfile::tempdir().unwrap();

    let err = MiniLm::load_pinned(dir.path()).unwrap_err();
    assert_eq!((err.status(), err.kind()), (503, ErrorKind::ModelFile));
    assert!(err.detail().contains("fetch-models.sh"), "{}", err.detail());

    let copy = dir.path().join("all-minilm-l6-v2");
    std::fs::create_dir_all(&copy).unwrap();
    for name in ["model.safetensors", "tokenizer.json", "config.json"] {
        std::fs::copy(real.join(name), copy.join(name)).unwrap();
    }
    assert!(
        MiniLm::load_pinned(dir.path()).is_ok(),
        "verified copies load"
    );

    let mut tokenizer = std::fs::read(copy.join("tokenizer.json")).unwrap();
    tokenizer[100] ^= 1;
    std::fs::write(copy.join("tokenizer.json"), tokenizer).unwrap();
    let err = MiniLm::load_pinned(dir.path()).unwrap_err();
    assert_eq!((err.status(), err.kind()), (503, ErrorKind::ModelFile));
    assert!(err.detail().contains("SHA-256"), "{}", err.detail());

    assert_eq!(
        MiniLm::from_dir(dir.path().join("nowhere"))
            .unwrap_err()
            .status(),
        503
    );
}
