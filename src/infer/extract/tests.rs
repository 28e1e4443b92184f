use super::*;
use crate::llm::ScriptedLlm;

fn at() -> DateTime<Utc> {
    chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 22, 10, 30, 0).unwrap()
}

#[tokio::test]
async fn the_extraction_prompt_carries_date_policy_and_labels() {
    let llm = ScriptedLlm::new([
        r#"{"facts": [{"text": " Likes tea ", "categories": ["food", "made_up"], "importance": 42},
                      {"text": "likes tea"}, {"text": "How are you today?"},
                      {"text": "¿Dónde vives?"}]}"#,
    ]);
    let labels = vec![Label::new("food", "what they eat and drink")];
    let facts = extract_facts(
        &llm,
        &[Message::user("I like tea")],
        at(),
        "Never store health data",
        &labels,
    )
    .await
    .unwrap();
    assert_eq!(facts.value.len(), 1);
    let f = &facts.value[0];
    assert_eq!(f.text, "Likes tea");
    assert_eq!(f.categories, vec!["food"]);
    assert_eq!(f.importance, 10);
    let request = &llm.requests()[0];
    let system = &request.messages[0].content;
    assert!(system.contains("Never store health data"));
    assert!(system.contains("Categories: food (what they eat and drink)"));
    // The date comes with the conversation, after the fixed instructions and examples.
    let last = &request.messages.last().unwrap().content;
    assert!(last.contains("2026-11-22 (Sunday)"), "{last}");
    assert!(last.contains("user: I like tea"));
    assert!(!system.contains("2026-11-22"));
    // The examples' labels are the project's: "food" only, so none of the catalogue's.
    let examples = &request.messages[1..request.messages.len() - 1];
    assert_eq!(examples.len(), 2 * EXTRACTION_EXAMPLES.len());
    assert!(examples
        .iter()
        .all(|m| !m.content.contains("sports") && !m.content.contains("family")));
}

/// A fact the model copied from the prompt's own examples is dropped, unless the
/// conversation says it too; facts of the conversation stay.
#[tokio::test]
async fn a_fact_copied_from_the_instructions_is_dropped() {
    let copied = r#"{"facts": [{"text": "I adopted a rescue cat called Marmite."},
                               {"text": "I work at a bakery on Saturdays"}]}"#;
    let llm = ScriptedLlm::new([copied, copied]);
    let extract = |text: &'static str| {
        let llm = &llm;
        async move {
            let facts = extract_facts(llm, &[Message::user(text)], at(), "", &[])
                .await
                .unwrap();
            facts.value.into_iter().map(|f| f.text).collect::<Vec<_>>()
        }
    };
    // The conversation shares "adopted" with the example, not "rescue" or "Marmite".
    assert_eq!(
        extract("I adopted a kitten, and I work at a bakery on Saturdays").await,
        ["I work at a bakery on Saturdays"]
    );
    // Said in the conversation: kept, though the example says it too.
    assert_eq!(
        extract("I adopted a rescue cat, she's called Marmite. I work at a bakery on Saturdays")
            .await
            .len(),
        2
    );
}

/// The facts `extract_facts` keeps from a model that replies `reply` (once: a second
/// call would fail) to a conversation.
async fn extracted(reply: &str, conversation: &[Message], labels: &[Label]) -> Vec<Fact> {
    let llm = ScriptedLlm::new([reply]);
    extract_facts(&llm, conversation, at(), "", labels)
        .await
        .unwrap()
        .value
}

fn texts(facts: &[Fact]) -> Vec<&str> {
    facts.iter().map(|f| f.text.as_str()).collect()
}

/// Facts in the assistant's words are dropped, and so are one-word facts; facts in the
/// user's words, or in words of neither (a translation), stay.
#[tokio::test]
async fn facts_the_user_did_not_say_are_dropped() {
    let reply = r#"{"facts": [
        {"text": "The capital of Australia is Canberra"},
        {"text": "You got married in June"},
        {"text": "The user is a dentist"},
        {"text": "Cheers!"},
        {"text": "東京に住んでいます"}]}"#;
    let conversation = [
        Message::user("Is Sydney the capital of Australia? I got married in June!"),
        Message::assistant("No, the capital of Australia is Canberra. Congratulations to you!"),
        Message::user("Soy dentista. Cheers! 東京に住んでいます"),
    ];
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        [
            "You got married in June",
            "The user is a dentist",
            "東京に住んでいます"
        ]
    );
}

#[tokio::test]
async fn facts_in_the_words_of_the_conversation_are_kept_as_written() {
    // A paraphrase keeps most of its message's words, or its language's small words; the
    // user is "user" to the model.
    let reply = r#"{"facts": [{"text": "User loves hiking at the weekend"},
        {"text": "I'm moving to Porto in 2026-05"},
        {"text": "Tigre es el nombre del gato adoptado"}]}"#;
    let conversation = [
        Message::user("I go hiking every weekend. We move to Porto in May!"),
        Message::assistant("Lovely."),
        Message::user("¡Ayer adoptamos un gato! Se llama Tigre."),
    ];
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        [
            "User loves hiking at the weekend",
            "I'm moving to Porto in 2026-05",
            "Tigre es el nombre del gato adoptado"
        ]
    );
}
