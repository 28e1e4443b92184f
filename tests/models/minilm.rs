//! The real local model: all-MiniLM-L6-v2, alone and as the default embedder of a
//! `Memory` on a SQLite file. Needs `scripts/fetch-models.sh` to have run.

use memlane::{EmbedMode, Embedder, Memory, MiniLm, SearchMode};

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn minilm_matches_the_published_model() {
    let model = MiniLm::load_default().unwrap();
    assert_eq!(model.dimension(), 384);
    let unpinned = MiniLm::from_dir(MiniLm::default_dir()).unwrap();
    assert_eq!(unpinned.dimension(), 384, "read from the model's config");
    let texts: Vec<String> = [
        "I love pizza",
        "Pizza is my favourite food",
        "That is a happy person",
        "That is a very happy person",
        "The quarterly tax filing deadline is approaching",
    ]
    .map(String::from)
    .to_vec();
    let v = model.embed(&texts, EmbedMode::Document).await.unwrap();
    for x in &v {
        assert!((cosine(x, x) - 1.0).abs() < 1e-4, "unit length");
    }
    // Reference values of the published model (sentence-transformers), checked here.
    assert!(
        (cosine(&v[0], &v[1]) - 0.867).abs() < 0.01,
        "{}",
        cosine(&v[0], &v[1])
    );
    assert!(
        (cosine(&v[2], &v[3]) - 0.943).abs() < 0.01,
        "{}",
        cosine(&v[2], &v[3])
    );
    assert!(cosine(&v[0], &v[4]) < 0.3);
}

#[tokio::test]
async fn batching_and_padding_do_not_change_vectors() {
    let model = MiniLm::load_default().unwrap();
    let short = "Cats sleep a lot".to_string();
    let long = "A much longer sentence about the history of the Roman empire, its roads, \
                its aqueducts and the many provinces it governed for centuries"
        .to_string();
    let alone = model.embed_one(&short, EmbedMode::Query).await.unwrap();
    let batch = model
        .embed(&[long.clone(), short.clone(), long], EmbedMode::Document)
        .await
        .unwrap();
    assert!(alone
        .iter()
        .zip(&batch[1])
        .all(|(a, b)| (a - b).abs() < 1e-4));
    // More texts than one batch holds, of many lengths: the batches run on several
    // threads, and every vector comes back in its text's place.
    let words = [
        "river", "stone", "lamp", "orchard", "violin", "harbour", "ledger",
    ];
    let many: Vec<String> = (0..70)
        .map(|i| {
            (0..1 + (i * 7) % 23)
                .map(|w| words[(i + w) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
                + &format!(" {i}")
        })
        .collect();
    let together = model.embed(&many, EmbedMode::Document).await.unwrap();
    assert_eq!(together.len(), many.len());
    for (text, v) in many.iter().zip(&together) {
        let one = model.embed_one(text, EmbedMode::Document).await.unwrap();
        assert!(cosine(&one, v) > 0.9999, "{text}: {}", cosine(&one, v));
    }
    let over_limit = "word ".repeat(2_000);
    let v = model
        .embed_one(&over_limit, EmbedMode::Document)
        .await
        .unwrap();
    assert_eq!(
        v.len(),
        384,
        "texts past the token limit are truncated, not refused"
    );
}

#[tokio::test]
async fn memory_on_a_file_with_the_real_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("real.db");
    let facts = [
        "I have a golden retriever named Max",
        "My favourite cuisine is Thai food, especially green curry",
        "I work night shifts as an ICU nurse",
        "I am learning to play the violin",
        "My sister lives in Toronto",
    ];
    let ids = {
        let memory = Memory::open(&path).await.unwrap();
        let out = memory
            .add(
                facts
                    .iter()
                    .map(|f| memlane::Message::user(*f))
                    .collect::<Vec<_>>(),
            )
            .user("dana")
            .infer(false)
            .await
            .unwrap();
        memory
            .add("I have a golden retriever too")
            .user("eli")
            .infer(false)
            .await
            .unwrap();
        out.results.iter().map(|r| r.id).collect::<Vec<_>>()
    };
    let memory = Memory::open(&path).await.unwrap();
    // No word overlap between the questions and the answers: this is the model at work.
    for (question, want) in [
        ("What pets does she have?", 0),
        ("What should we cook for dinner?", 1),
        ("What is her job?", 2),
        ("Which musical instrument?", 3),
        ("Where do her relatives live?", 4),
    ] {
        let hits = memory.search(question).user("dana").top_k(1).await.unwrap();
        assert_eq!(hits.results[0].record.id, ids[want], "{question}");
        assert!(hits.results[0].record.owners.user_id.as_deref() == Some("dana"));
    }
    let retrieved = memory.retrieve("dog", "eli", 3).await.unwrap();
    assert_eq!(retrieved.results.len(), 1);
    let e = memory.embed("hello world", EmbedMode::Query).await.unwrap();
    assert_eq!((e.dimension, e.embedding.len()), (384, 384));
}

#[tokio::test]
async fn in_memory_with_the_default_model() {
    let memory = Memory::in_memory().await.unwrap();
    let copy = memory.clone();
    copy.add("I am allergic to peanuts")
        .user("fay")
        .infer(false)
        .await
        .unwrap();
    copy.add("I collect vintage postcards")
        .user("fay")
        .infer(false)
        .await
        .unwrap();
    let hits = memory
        .search("Which foods are dangerous for her?")
        .user("fay")
        .top_k(1)
        .await
        .unwrap();
    assert_eq!(hits.results[0].record.memory, "I am allergic to peanuts");
    assert_eq!(
        memory.list().await.unwrap().pagination.count,
        2,
        "clones share one store"
    );
}

#[tokio::test]
async fn default_hybrid_search_is_not_fooled_by_function_words() {
    let memory = Memory::in_memory().await.unwrap();
    for fact in [
        "I'm vegetarian, and I can't stand coriander.",
        "I'm training for the Porto half marathon in October.",
        "My daughter Maya starts primary school in September.",
    ] {
        memory.add(fact).user("alice").infer(false).await.unwrap();
    }
    // "for" and "her" are in the question and in the wrong memories.
    let hits = memory
        .search("What should I cook for her tonight?")
        .user("alice")
        .top_k(1)
        .await
        .unwrap();
    assert_eq!(
        hits.results[0].record.memory,
        "I'm vegetarian, and I can't stand coriander."
    );
}

/// The README's first search runs as written there (its lines are checked against the
/// README) and finds the memory, with its threshold of 0.2, by meaning alone.
#[tokio::test]
async fn the_readmes_search_runs_as_written() {
    let readme = include_str!("../../README.md");
    for line in [
        r#".add("I'm vegetarian and I can't stand coriander")"#,
        r#".search("what should I cook for alice?")"#,
        ".threshold(0.2)",
        r#".filters(json!({"AND": [{"categories": "food"}, {"created_at": {"gte": "2024-01-01"}}]}))"#,
    ] {
        assert!(readme.contains(line), "the README no longer has {line}");
    }
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path().join("agent-memory.db"))
        .await
        .unwrap();
    memory
        .add("I'm vegetarian and I can't stand coriander")
        .user("alice")
        .metadata(serde_json::json!({"source": "onboarding"}))
        .categories(["food"])
        .infer(false)
        .await
        .unwrap();
    let hits = memory
        .search("what should I cook for alice?")
        .user("alice")
        .top_k(5)
        .threshold(0.2)
        .filters(serde_json::json!({"AND": [{"categories": "food"}, {"created_at": {"gte": "2024-01-01"}}]}))
        .await
        .unwrap();
    assert_eq!(hits.results.len(), 1, "{hits:#?}");
    assert_eq!(
        hits.results[0].record.memory,
        "I'm vegetarian and I can't stand coriander"
    );
    assert!(hits.results[0].signals.keyword.is_none());
}

/// Plain questions about a person's facts, as a user of a memory store asks them: at the
/// README's suggested threshold, 0.1, the memory that answers is the best hit in vector and
/// hybrid mode, the unrelated ones leave, and at least three are found by their meaning
/// alone (they share no word with their question).
#[tokio::test]
async fn plain_questions_keep_their_memory_at_a_threshold_of_a_tenth() {
    let memory = Memory::in_memory().await.unwrap();
    let facts = [
        "I'm vegetarian and I can't stand coriander",
        "My car is a blue Toyota Corolla",
        "I work as a nurse at the children's hospital",
        "My sister Ana lives in Lisbon",
        "I'm allergic to penicillin",
        "I play the cello in a community orchestra",
        "We adopted a beagle called Biscuit last spring",
        "I'm training for the Porto half marathon in October",
    ];
    for fact in facts {
        memory.add(fact).user("eva").infer(false).await.unwrap();
    }
    let cases = [
        ("What food should I avoid serving her?", 0),
        ("Which medicines are dangerous for her?", 4),
        ("Does she have pets?", 6),
        ("What's her job?", 2),
        ("What instrument does she play?", 5),
        ("Where does her sister live?", 3),
        ("Toyota", 1),
    ];
    let mut meaning_only = 0;
    for (question, answer) in cases {
        let mut scores = Vec::new();
        for mode in [SearchMode::Vector, SearchMode::Hybrid] {
            let hits = memory
                .search(question)
                .user("eva")
                .mode(mode)
                .threshold(0.1)
                .await
                .unwrap()
                .results;
            assert_eq!(
                hits.first().map(|h| h.record.memory.as_str()),
                Some(facts[answer]),
                "{question} ({mode:?}): {hits:#?}"
            );
            assert!(hits.len() <= 3, "{question} ({mode:?}): {hits:#?}");
            scores.push(hits[0].clone());
        }
        if scores[1].signals.keyword.is_none() {
            meaning_only += 1;
        }
    }
    assert!(
        meaning_only >= 3,
        "only {meaning_only} meaning-only matches"
    );
    // The car has nothing to do with food.
    let food = memory
        .search("What food should I avoid serving her?")
        .user("eva")
        .threshold(0.1)
        .await
        .unwrap();
    assert!(food.results.iter().all(|h| h.record.memory != facts[1]));
}

#[tokio::test]
async fn a_short_answer_is_found_by_the_question_it_answered() {
    let memory = Memory::in_memory().await.unwrap();
    for fact in [
        "Lisbon has steep hills and yellow trams.",
        "I'm training for the Porto half marathon in October.",
    ] {
        memory.add(fact).user("caro").infer(false).await.unwrap();
    }
    let conversation = memory
        .add(vec![
            memlane::Message::new("Mel", "Did you ever make it to Lisbon?"),
            memlane::Message::new("Caro", "Yes, last May, for a whole week!"),
            memlane::Message::new("Mel", "Lucky you. The weather here was awful."),
        ])
        .user("caro")
        .infer(false)
        .await
        .unwrap();
    let answer = conversation.results[1].id;
    let hits = memory
        .search("When did Caro travel to Lisbon?")
        .user("caro")
        .top_k(3)
        .await
        .unwrap();
    let found: Vec<_> = hits.results.iter().map(|h| h.record.id).collect();
    assert!(found.contains(&answer), "{hits:?}");
}

/// A chat stored verbatim, and a question whose answer shares its meaning but no word with
/// it: the answer is the best hybrid hit (its meaning, and the question it replied to, which
/// names the trip), above a turn that shares no word with the question either and that
/// three models chosen by words and neighbours put first by its cosine alone; and a word in
/// common or a neighbour never makes a memory score less than its meaning alone would.
#[tokio::test]
async fn the_answer_is_the_best_hybrid_hit_of_a_chat() {
    let memory = Memory::in_memory().await.unwrap();
    let chat = memory
        .add(vec![
            memlane::Message::assistant("What took you to Japan in April?"),
            memlane::Message::user(
                "Mostly my grandmother: she turned ninety and the whole family flew in.",
            ),
            memlane::Message::assistant("What a milestone! I hope the flights were smooth."),
            memlane::Message::user("They were, and I ate far too much ramen in Osaka."),
        ])
        .user("kai")
        .infer(false)
        .await
        .unwrap();
    let answer = chat.results[1].id;
    let hits = memory
        .search("Why did Kai visit Japan?")
        .user("kai")
        .await
        .unwrap()
        .results;
    assert_eq!(hits.len(), 4, "{hits:#?}");
    assert_eq!(hits[0].record.id, answer, "{hits:#?}");
    for hit in &hits {
        let mut alone = hit.signals;
        alone.keyword = None;
        alone.neighbours = None;
        let meaning = memlane::Calibration::FITTED.score(SearchMode::Hybrid, &alone);
        assert!(hit.score >= meaning, "{hit:#?}: {meaning}");
    }
}

#[tokio::test]
async fn a_time_the_query_names_finds_what_was_stored_then() {
    use chrono::{Duration, TimeZone, Utc};
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path().join("dated.db")).await.unwrap();
    let at = |y, m, d| Utc.with_ymd_and_hms(y, m, d, 18, 0, 0).unwrap();
    let now = Utc::now();
    let mut ids = Vec::new();
    for (text, when) in [
        (
            "Went hiking with Ana in the Sierra de Guadarrama",
            at(2025, 5, 9),
        ),
        (
            "Went hiking with Ana along the Costa Brava",
            at(2025, 9, 14),
        ),
        ("Cooked a big pot of lentil soup", now - Duration::hours(20)),
        (
            "Cooked a mushroom risotto for friends",
            now - Duration::days(40),
        ),
        ("My car is a blue Toyota Corolla", at(2025, 5, 9)),
    ] {
        let out = memory
            .add(text)
            .user("ana")
            .timestamp(when)
            .infer(false)
            .await
            .unwrap();
        ids.push(out.results[0].id);
    }
    let cases = [
        ("Where did I go hiking on 8 May 2025?", ids[0]),
        ("Where did I go hiking in September?", ids[1]),
        ("What did I cook yesterday?", ids[2]),
        ("What did I cook 6 weeks ago, around DATE?", ids[3]),
    ];
    let mut checked = 0;
    for mode in [SearchMode::Hybrid, SearchMode::Keyword, SearchMode::Vector] {
        for (query, want) in cases {
            let day = (now - Duration::days(40)).format("%-d %B %Y").to_string();
            let query = query.replace("DATE", &day);
            let hits = memory
                .search(&query)
                .user("ana")
                .mode(mode)
                .top_k(2)
                .await
                .unwrap();
            let top = &hits.results[0];
            assert_eq!(top.record.id, want, "{mode:?} {query}: {hits:#?}");
            assert_eq!(top.signals.period, Some(true), "{mode:?} {query}");
            checked += 1;
        }
    }
    assert_eq!(checked, 12);
    // A query that names no time is ranked as before: no memory is in or out of a period.
    let hits = memory.search("hiking with Ana").user("ana").await.unwrap();
    assert!(hits.results.iter().all(|h| h.signals.period.is_none()));
}

/// The crate's own forward pass (its `gemm` kernels, fused attention) against a plain BERT
/// written here with candle's tensor operations on the same files, text by text: texts of
/// many lengths and scripts, and one past the token limit.
#[cfg(feature = "local-llm")]
#[tokio::test]
async fn vectors_equal_those_of_a_plain_bert_on_candle() {
    use candle_core::{DType, Device, Module, Tensor, D};
    use candle_nn::VarBuilder;

    let dir = MiniLm::default_dir();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let size = |key: &str| config[key].as_u64().unwrap() as usize;
    let (h, heads, layers) = (
        size("hidden_size"),
        size("num_attention_heads"),
        size("num_hidden_layers"),
    );
    let eps = config["layer_norm_eps"].as_f64().unwrap();
    let vb = VarBuilder::from_buffered_safetensors(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        DType::F32,
        &Device::Cpu,
    )
    .unwrap();
    let linear = |vb: VarBuilder, inp: usize, out: usize| candle_nn::linear(inp, out, vb).unwrap();
    let norm = |vb: VarBuilder| candle_nn::layer_norm(h, eps, vb.pp("LayerNorm")).unwrap();
    let table = |name: &str, rows: usize| {
        candle_nn::embedding(rows, h, vb.pp("embeddings").pp(name)).unwrap()
    };
    let (word, position, kind) = (
        table("word_embeddings", size("vocab_size")),
        table("position_embeddings", size("max_position_embeddings")),
        table("token_type_embeddings", size("type_vocab_size")),
    );
    let embeddings_norm = norm(vb.pp("embeddings"));
    let mut tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    tokenizer.with_padding(None); // the file pads every text to 128 tokens
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams {
            max_length: 256, // the crate's limit for MiniLM
            ..Default::default()
        }))
        .unwrap();
    let reference = |text: &str| -> Vec<f32> {
        let ids = tokenizer.encode(text, true).unwrap().get_ids().to_vec();
        let n = ids.len();
        let ids = Tensor::from_vec(ids, (1, n), &Device::Cpu).unwrap();
        let positions = Tensor::arange(0u32, n as u32, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let mut x = (word.forward(&ids).unwrap()
            + position.forward(&positions).unwrap()
            + kind.forward(&ids.zeros_like().unwrap()).unwrap())
        .unwrap();
        x = embeddings_norm.forward(&x).unwrap();
        let d = h / heads;
        for l in 0..layers {
            let layer = vb.pp(format!("encoder.layer.{l}"));
            let split = |t: Tensor| {
                t.reshape((1, n, heads, d))
                    .unwrap()
                    .transpose(1, 2)
                    .unwrap()
                    .contiguous()
                    .unwrap()
            };
            let attention = layer.pp("attention");
            let project = |name: &str| {
                split(
                    linear(attention.pp("self").pp(name), h, h)
                        .forward(&x)
                        .unwrap(),
                )
            };
            let (q, k, v) = (project("query"), project("key"), project("value"));
            let scores = (q.matmul(&k.t().unwrap()).unwrap() / (d as f64).sqrt()).unwrap();
            let weights = candle_nn::ops::softmax(&scores, D::Minus1).unwrap();
            let context = weights
                .matmul(&v)
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .reshape((1, n, h))
                .unwrap();
            let out = attention.pp("output");
            let attended = (linear(out.pp("dense"), h, h).forward(&context).unwrap() + &x).unwrap();
            x = norm(out).forward(&attended).unwrap();
            let inner = size("intermediate_size");
            let up = linear(layer.pp("intermediate").pp("dense"), h, inner)
                .forward(&x)
                .unwrap()
                .gelu_erf()
                .unwrap();
            let out = layer.pp("output");
            let fed = (linear(out.pp("dense"), inner, h).forward(&up).unwrap() + &x).unwrap();
            x = norm(out).forward(&fed).unwrap();
        }
        let mean = x.mean(1).unwrap().squeeze(0).unwrap();
        let v = mean.to_vec1::<f32>().unwrap();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect()
    };
    let mut texts: Vec<String> = [
        "I love pizza",
        "Carlos moved to Valencia last month and works at a bakery near the port",
        "Ich wohne seit zwei Jahren in Berlin und arbeite als Ärztin",
        "私は毎朝コーヒーを飲みます",
        "ok",
        "",
    ]
    .map(String::from)
    .to_vec();
    texts.extend((0..30).map(|i| "the committee reviewed the budget again ".repeat(1 + i)));
    let model = MiniLm::load_default().unwrap();
    let ours = model.embed(&texts, EmbedMode::Document).await.unwrap();
    assert_eq!(ours.len(), texts.len());
    for (text, v) in texts.iter().zip(&ours) {
        let want = reference(text);
        assert!(cosine(v, &want) > 0.99999, "{text:?}: {}", cosine(v, &want));
    }
}

/// Concurrent calls share passes (small ones are queued and embedded together): each still
/// gets its own texts' vectors, in its order, next to a large call that runs on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_each_get_their_own_vectors() {
    let model = MiniLm::load_default().unwrap();
    let call = |c: usize| -> Vec<String> {
        (0..1 + c % 3)
            .map(|i| {
                format!(
                    "call {c} text {i}: {}",
                    "about the garden ".repeat(1 + (c + i) % 5)
                )
            })
            .collect()
    };
    let large: Vec<String> = (0..100)
        .map(|i| format!("a large import, memory {i}"))
        .collect();
    let mut tasks = Vec::new();
    for c in 0..24 {
        let model = model.clone();
        tasks.push(tokio::spawn(async move {
            (
                call(c),
                model.embed(&call(c), EmbedMode::Document).await.unwrap(),
            )
        }));
    }
    let big = {
        let model = model.clone();
        let large = large.clone();
        tokio::spawn(async move { model.embed(&large, EmbedMode::Document).await.unwrap() })
    };
    let mut results = vec![(large, big.await.unwrap())];
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let mut checked = 0;
    for (texts, vectors) in results {
        assert_eq!(texts.len(), vectors.len());
        for (text, v) in texts.iter().zip(&vectors) {
            let alone = model.embed_blocking(std::slice::from_ref(text)).unwrap();
            assert!(
                cosine(&alone[0], v) > 0.99999,
                "{text}: {}",
                cosine(&alone[0], v)
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 100 + (0..24).map(|c| 1 + c % 3).sum::<usize>());
}
