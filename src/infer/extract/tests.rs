use super::*;
use crate::llm::ScriptedLlm;

fn at() -> DateTime<Utc> {
    chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 22, 10, 30, 0).unwrap()
}

/// The user's statements: each sentence once, but questions, small talk, single words
/// and what the assistant said.
#[test]
fn statements_are_the_users_sentences_that_state_something() {
    let messages = [
        Message::user("¡Hola! Ya no estoy con Javier. ¿Conoces un bar vegano en Sevilla?"),
        Message::assistant("Lo siento mucho. ¿Estás bien?"),
        Message::user("Bien. Ya no estoy con Javier; vivo en Sevilla\nGracias"),
    ];
    assert_eq!(
        statements(&messages),
        ["Ya no estoy con Javier", "vivo en Sevilla"]
    );
}

/// What the speaker does, said without "I" in Spanish, Italian or Portuguese: a verb in
/// the first person near the start, something after it, no denial and no one else
/// before it; never a question.
#[test]
fn activities_are_what_the_speaker_says_they_do_without_i() {
    let messages = [Message::user(
        "Toco la batería. Às noites dou aulas de guitarra a miúdos. Il sabato gioco a \
         calcetto. No juego al tenis. Trabajo. El trabajo es duro. Mi madre y yo vivimos \
         en Lugo. ¿Juego mañana? Ayer jugué al fútbol.",
    )];
    assert_eq!(
        activities(&messages),
        [
            "Toco la batería",
            "Às noites dou aulas de guitarra a miúdos",
            "Il sabato gioco a calcetto"
        ]
    );
}

/// What no fact speaks of: every statement when there is no fact; else each clause said
/// on its own that shares no word with a fact. Never a question or small talk.
#[test]
fn left_out_are_the_clauses_no_fact_speaks_of() {
    let messages = [Message::user(
        "Hi there! I'm not with Javier anymore, I live alone in Triana now. Do you know a \
         good bar? I work at a bakery.",
    )];
    let fact = |text: &str| Fact {
        text: text.to_owned(),
        categories: Vec::new(),
        entities: Vec::new(),
        importance: super::super::default_importance(),
    };
    assert_eq!(
        left_out(&[], &messages),
        [
            "I'm not with Javier anymore, I live alone in Triana now",
            "I work at a bakery"
        ]
    );
    assert_eq!(
        left_out(
            &[fact("Lives alone in Triana"), fact("Works at a bakery")],
            &messages
        ),
        ["I'm not with Javier anymore"]
    );
    let every = [
        fact("No longer with Javier"),
        fact("Lives alone in Triana"),
        fact("Works at a bakery"),
    ];
    assert!(left_out(&every, &messages).is_empty());
}

/// A remark on the weather or a wish the model returns as a fact is not stored; a fact
/// with something of the user in it is, small talk and all.
#[tokio::test]
async fn small_talk_the_model_extracts_is_dropped() {
    let llm = ScriptedLlm::new([r#"{"facts": [{"text": "Lovely sunny morning here"},
        {"text": "I moved to Leeds, lovely and sunny"}, {"text": "Wish me luck!"}]}"#]);
    let said = "Lovely sunny morning here! I moved to Leeds, lovely and sunny. Wish me luck!";
    let facts = extract_facts(&llm, &[Message::user(said)], at(), "", &[])
        .await
        .unwrap();
    let texts: Vec<&str> = facts.value.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(texts, ["I moved to Leeds, lovely and sunny"]);
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
async fn a_translated_fact_is_kept_in_the_users_own_words() {
    let reply = r#"{"facts": [
        {"text": "Moos is the correct name for our cat", "categories": ["pets"]},
        {"text": "Ik zwem graag"},
        {"text": "I'm 34"},
        {"text": "I have a job as a baker"},
        {"text": "I bake bread for a living"},
        {"text": "I have been a teacher for 12 years"},
        {"text": "I play guitar"},
        {"text": "The name of our cat is Moos"}]}"#;
    let conversation = [
        Message::user("Onze kat heet Pluis."),
        Message::assistant("Leuk! Moos mooier?"),
        Message::user(
            "Foutje: onze kat heet eigenlijk Moos, niet Pluis. Ik zwem graag.\n\
             Ik ben 34; ik werk als bakker.\nTeacher, 12 years. Ich spiele Gitarre.",
        ),
    ];
    let facts = extracted(reply, &conversation, &[Label::new("pets", "")]).await;
    // The clause with the fact's name, number or a word alike ("baker", "bakker"),
    // never the assistant's words, whole between commas, once; a translation with none
    // of the user's words stays. A user who writes no English word betrays a
    // translation with one.
    assert_eq!(
        texts(&facts),
        [
            "onze kat heet eigenlijk Moos, niet Pluis",
            "Ik zwem graag",
            "Ik ben 34",
            "ik werk als bakker",
            "I bake bread for a living",
            "Teacher, 12 years",
            "Ich spiele Gitarre"
        ]
    );
    assert_eq!(facts[0].categories, ["pets"]);
}

#[tokio::test]
async fn facts_cut_out_of_one_thing_said_are_kept_as_said() {
    let reply = r#"{"facts": [
        {"text": "I live in Madrid", "categories": ["home"], "entities": ["Madrid"],
         "importance": 7},
        {"text": "I live near Retiro park", "categories": ["places"],
         "entities": ["Retiro park"], "importance": 8},
        {"text": "My dog is called Rex"},
        {"text": "He's a beagle"},
        {"text": "I'm vegan now"},
        {"text": "No more meat for me"},
        {"text": "I live in Leeds"},
        {"text": "I work as a nurse"},
        {"text": "Retiro park is nearby"},
        {"text": "Ho due gatti"},
        {"text": "Ho due gatti neri"},
        {"text": "I love steak"},
        {"text": "I have one every Friday"}]}"#;
    let conversation = [
        Message::user(
            "Big news: I live in Madrid, near Retiro park. My dog is called Rex, he's a \
             beagle. I'm vegan now, no more meat for me.",
        ),
        Message::assistant("Nice!"),
        Message::user(
            "I live in Leeds and I work as a nurse! Ho due gatti neri. Ho due gatti neri. \
             I love steak, I have one every Friday.",
        ),
    ];
    let labels = [Label::new("home", ""), Label::new("places", "")];
    let facts = extracted(reply, &conversation, &labels).await;
    // One sentence, two facts: the sentence, at the first one's place, with the labels
    // and the highest importance of both. Two things joined by "and" or by a comma
    // before a subject, a fact with a word the sentence lacks ("nearby") and a sentence
    // said twice stay as they were; a clause after such a comma that points back at
    // the one before it ("one") is one thing said with it.
    assert_eq!(
        texts(&facts),
        [
            "I live in Madrid, near Retiro park",
            "My dog is called Rex",
            "He's a beagle",
            "I'm vegan now, no more meat for me",
            "I live in Leeds",
            "I work as a nurse",
            "Retiro park is nearby",
            "Ho due gatti",
            "Ho due gatti neri",
            "I love steak, I have one every Friday"
        ]
    );
    assert_eq!(facts[0].categories, ["home", "places"]);
    assert_eq!(facts[0].entities, ["Madrid", "Retiro park"]);
    assert_eq!(facts[0].importance, 8);
}

/// A fact cut out of a sentence that marks it as one more of its kind ("ook", "too"),
/// says what it took the place of ("statt") or puts it at set times ("In het
/// weekend", "On Sundays") keeps the sentence when the model left the mark out; a fact
/// with its mark, a first "Also," that brings news and one of two clauses stay as the
/// model wrote them.
#[tokio::test]
async fn a_fact_that_lost_its_speakers_mark_is_kept_as_said() {
    let reply = r#"{"facts": [
        {"text": "Ik werk als ober in een café"},
        {"text": "Ik werk als ober in een strandtent"},
        {"text": "I play the violin too"},
        {"text": "I moved to Porto"},
        {"text": "I bake bread"},
        {"text": "I coach football"},
        {"text": "Ich trinke Kräutertee seit zwei Wochen"},
        {"text": "I cycle to work instead of driving"}]}"#;
    let conversation = [Message::user(
        "In het weekend werk ik ook als ober in een café. In het weekend werk ik als ober \
         in een strandtent. I play the violin too. Also, I \
         moved to Porto. On Sundays I bake bread. I also teach, and I coach football. \
         Seit zwei Wochen trinke ich statt Espresso nur noch Kräutertee. These days I \
         cycle to work instead of driving.",
    )];
    let facts = extracted(reply, &conversation, &[]).await;
    assert_eq!(
        texts(&facts),
        [
            "In het weekend werk ik ook als ober in een café",
            "In het weekend werk ik als ober in een strandtent",
            "I play the violin too",
            "I moved to Porto",
            "On Sundays I bake bread",
            "I coach football",
            "Seit zwei Wochen trinke ich statt Espresso nur noch Kräutertee",
            "I cycle to work instead of driving"
        ]
    );
}

/// A fact that lost the name or the kind its sentence gives after a comma keeps the
/// sentence; a denial, a correction, a clause or a longer phrase after the comma, and
/// a fact that took the words after it, stay as the model wrote them.
#[tokio::test]
async fn a_fact_that_lost_its_apposition_is_kept_as_said() {
    let reply = r#"{"facts": [
        {"text": "Ik heb een kat"},
        {"text": "Meine Nachbarin hat jetzt auch einen Hund"},
        {"text": "I have a parrot"},
        {"text": "My climbing gym is in Derby"},
        {"text": "Ich fahre jetzt Bus in Graz"},
        {"text": "I work in a bakery"},
        {"text": "Ho comprato una bici"},
        {"text": "I bought a van"}]}"#;
    let conversation = [Message::user(
        "Ik heb een kat, Pluis. Meine Nachbarin hat jetzt auch einen Hund, einen Dackel. \
         I have a parrot, an African grey. My climbing gym is in Derby, not Leicester. Ich \
         fahre jetzt Bus in Graz, nicht mehr Taxi. I work in a bakery, it is hard work. \
         Ho comprato una bici, Bianchi. I bought a van, a decision my wife laughs about.",
    )];
    let facts = extracted(reply, &conversation, &[]).await;
    assert_eq!(
        texts(&facts),
        [
            "Ik heb een kat, Pluis",
            "Meine Nachbarin hat jetzt auch einen Hund, einen Dackel",
            "I have a parrot, an African grey",
            "My climbing gym is in Derby",
            "Ich fahre jetzt Bus in Graz",
            "I work in a bakery",
            "Ho comprato una bici, Bianchi",
            "I bought a van"
        ]
    );
}

/// A fact that left out a name its part of the sentence gives keeps that part; a name
/// after a denial or a word of where something came from stays out, and so does one in
/// another part of the sentence.
#[tokio::test]
async fn a_fact_that_lost_a_name_is_kept_as_said() {
    let reply = r#"{"facts": [
        {"text": "Ce week-end je vais voir ma sœur"},
        {"text": "I moved to Valencia last month"},
        {"text": "My gym is in Derby"},
        {"text": "Ich spiele Geige im Orchester"},
        {"text": "Ik werk in een bakkerij"},
        {"text": "Ich wohne in Hamburg"}]}"#;
    let conversation = [Message::user(
        "Ce week-end je vais voir ma sœur Camille à Annecy. I moved to Valencia from Madrid \
         last month. My gym is in Derby, not Leicester. Ich spiele Geige im Orchester, \
         Mahler vor allem. Ik werk sinds mei in een bakkerij. Ich wohne nicht mehr in \
         Bremen sondern in Hamburg.",
    )];
    let facts = extracted(reply, &conversation, &[]).await;
    assert_eq!(
        texts(&facts),
        [
            "Ce week-end je vais voir ma sœur Camille à Annecy",
            "I moved to Valencia last month",
            "My gym is in Derby",
            "Ich spiele Geige im Orchester",
            "Ik werk in een bakkerij",
            "Ich wohne in Hamburg"
        ]
    );
}

/// A fact in other words than the user's that lost a name the user gave is the user's
/// piece again; not when another fact keeps the name, nor for a month the fact wrote as a
/// date, nor when the fact shares fewer than two words with any piece.
#[tokio::test]
async fn a_fact_in_other_words_that_lost_a_name_is_kept_as_said() {
    let reply = r#"{"facts": [
        {"text": "Rend visite à ses parents ce week-end"},
        {"text": "Vit à Nantes avec son mari"},
        {"text": "Son mari s'appelle Paul"},
        {"text": "Is moving to Porto in 2026-05"},
        {"text": "Enjoys opera"}]}"#;
    let conversation = [Message::user(
        "Ce week-end je rends visite à mes parents à Lyon. Je vis à Nantes avec mon mari \
         Paul. We're moving to Porto in May. I love Verdi's operas.",
    )];
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        [
            "Ce week-end je rends visite à mes parents à Lyon",
            "Vit à Nantes avec son mari",
            "Son mari s'appelle Paul",
            "Is moving to Porto in 2026-05",
            "Enjoys opera"
        ]
    );
}

/// A clause that points back at someone named in the clause before it, by a pronoun
/// ("la", "leur", "verla", "visitá-lo", "lo vedo", "him"), is one thing said with it: two
/// facts cut from them are put back together, and a fact of the pronoun's clause alone
/// takes the clause it points at. Clauses with no such pronoun (an article: "de la
/// natation", "la sera", "la semaine"; "her" of a thing), and a subject after "and", stay
/// apart.
#[tokio::test]
async fn a_fact_that_points_back_is_kept_with_what_it_points_at() {
    let reply = r#"{"facts": [
        {"text": "Ma mère vit à Marseille"},
        {"text": "Je vais la voir le mois prochain"},
        {"text": "Mi abuela vive en Lugo"},
        {"text": "Voy a verla en Navidad"},
        {"text": "My brother moved to Perth"},
        {"text": "I'm visiting him in March"},
        {"text": "Je lui rends visite le dimanche"},
        {"text": "Mes amis d'enfance sont à Pau"},
        {"text": "Je leur rends visite en août"},
        {"text": "Meu irmão mora no Porto"},
        {"text": "Vou visitá-lo em junho"},
        {"text": "Mio fratello vive a Roma"},
        {"text": "Lo vedo spesso"},
        {"text": "J'habite à Nantes"},
        {"text": "Je fais de la natation"},
        {"text": "Abito a Torino"},
        {"text": "La sera gioco a calcetto"},
        {"text": "I live in Leeds"},
        {"text": "I visit her flat"},
        {"text": "Mon fils habite à Lyon"},
        {"text": "Je vais la semaine prochaine à Paris"},
        {"text": "Vivo en Sevilla"},
        {"text": "Juego al fútbol y al pádel"},
        {"text": "Mon oncle a une maison à Sète"},
        {"text": "J'y passe l'été"},
        {"text": "Lo visito cada verano"},
        {"text": "Mijn zus woont in Groningen"},
        {"text": "Ik ga haar volgende week opzoeken"},
        {"text": "Meine Eltern wohnen in Ulm"},
        {"text": "Ich besuche sie im Herbst"},
        {"text": "Nos petits-enfants vivent à Nancy"},
        {"text": "Nous les voyons tous les week-ends"},
        {"text": "Voy a verla en agosto"},
        {"text": "Ma sœur vit à Lyon"},
        {"text": "Je vais lui rendre visite en mai"},
        {"text": "I quit my job at the bank"},
        {"text": "Now I work at a bakery and I love it"},
        {"text": "I'm seeing her in May"}]}"#;
    let conversation = [
        Message::user(
        "Ma mère vit à Marseille, je vais la voir le mois prochain. Mi abuela vive en Lugo y \
         voy a verla en Navidad. My brother moved to Perth and I'm visiting him in March. \
         Mon frère habite à côté, je lui rends visite le dimanche. Mes amis d'enfance sont à Pau et je leur rends visite en août. Meu irmão mora no \
         Porto e vou visitá-lo em junho. Mio fratello vive a Roma e lo vedo spesso. \
         J'habite à Nantes, je fais de la natation. Abito a Torino e la sera gioco a \
         calcetto. I live in Leeds and I visit her flat. Mon fils habite à Lyon, je vais \
         la semaine prochaine à Paris. Vivo en Sevilla y juego al fútbol y al pádel. Mon \
         oncle a une maison à Sète, j'y passe l'été. Mi hermano vive en Vigo, lo visito \
         cada verano. Mijn zus woont in Groningen, ik ga haar \
         volgende week opzoeken. Meine Eltern wohnen in Ulm, ich besuche sie im Herbst. \
         Nos petits-enfants vivent à Nancy. Nous les voyons tous les week-ends. Mi \
         hermana vive en Cádiz. Voy a verla en agosto. Ma sœur vit à Lyon. Je vais lui \
         rendre visite en mai. I quit my job at the bank. Now I \
         work at a bakery and I love it.",
        ),
        Message::user("I'm seeing her in May."),
    ];
    let facts = extracted(reply, &conversation, &[]).await;
    assert_eq!(
        texts(&facts),
        [
            "Ma mère vit à Marseille, je vais la voir le mois prochain",
            "Mi abuela vive en Lugo y voy a verla en Navidad",
            "My brother moved to Perth and I'm visiting him in March",
            "Mon frère habite à côté, je lui rends visite le dimanche",
            "Mes amis d'enfance sont à Pau et je leur rends visite en août",
            "Meu irmão mora no Porto e vou visitá-lo em junho",
            "Mio fratello vive a Roma e lo vedo spesso",
            "J'habite à Nantes",
            "Je fais de la natation",
            "Abito a Torino",
            "La sera gioco a calcetto",
            "I live in Leeds",
            "I visit her flat",
            "Mon fils habite à Lyon",
            "Je vais la semaine prochaine à Paris",
            "Vivo en Sevilla",
            "Juego al fútbol y al pádel",
            "Mon oncle a une maison à Sète, j'y passe l'été",
            "Mi hermano vive en Vigo, lo visito cada verano",
            "Mijn zus woont in Groningen, ik ga haar volgende week opzoeken",
            "Meine Eltern wohnen in Ulm, ich besuche sie im Herbst",
            "Nos petits-enfants vivent à Nancy. Nous les voyons tous les week-ends",
            "Mi hermana vive en Cádiz. Voy a verla en agosto",
            "Ma sœur vit à Lyon. Je vais lui rendre visite en mai",
            "I quit my job at the bank",
            "Now I work at a bakery and I love it",
            "I'm seeing her in May"
        ]
    );
}

/// A fact that gave the subject of one clause what the speaker said of themselves in
/// the next is the speaker's clause again; a fact of the other clause's own subject,
/// one that names the speaker and one that takes nothing from another clause stay as
/// written.
#[tokio::test]
async fn a_fact_that_gave_someone_else_the_speakers_clause_is_the_speakers_again() {
    let reply = r#"{"facts": [
        {"text": "Mi novia se llama Lucía"},
        {"text": "Mi novia trabaja en un hotel"},
        {"text": "My wife works at a bank"},
        {"text": "Mein Bruder wohnt in Köln"},
        {"text": "I work at a school"},
        {"text": "Works at a post office"},
        {"text": "Lea and I sing in a choir"}]}"#;
    let conversation = [Message::user(
        "Mi novia se llama Lucía y trabajo en un hotel. My wife is Ana and I work at a \
         bank. Mein Bruder wohnt in Köln und er arbeitet bei Ford. My son is Tom and I \
         work at a school. Tim is my son and I work at a post office. My sister is Lea \
         and I sing in a choir.",
    )];
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        [
            "Mi novia se llama Lucía",
            "trabajo en un hotel",
            "I work at a bank",
            "Mein Bruder wohnt in Köln",
            "I work at a school",
            "Works at a post office",
            "Lea and I sing in a choir"
        ]
    );
}

/// A fact that is its sentence's words without the speaker keeps its sentence; one
/// that keeps its own subject, or whose sentence names no speaker, stays as written.
#[tokio::test]
async fn a_fact_that_lost_its_speaker_is_kept_as_said() {
    let reply = r#"{"facts": [
        {"text": "Koriander heerlijk"},
        {"text": "Sanne is a nurse"},
        {"text": "Tomatoes on the balcony"},
        {"text": "Rome in May"}]}"#;
    let conversation = [Message::user(
        "Tegenwoordig vind ik koriander heerlijk. My friend Sanne is a nurse. These days \
         I grow tomatoes on the balcony. Trip to Rome in May!",
    )];
    let facts = extracted(reply, &conversation, &[]).await;
    assert_eq!(
        texts(&facts),
        [
            "Tegenwoordig vind ik koriander heerlijk",
            "Sanne is a nurse",
            "These days I grow tomatoes on the balcony",
            "Rome in May"
        ]
    );
}

/// French "ma" is "my": a French sentence with it is put back together as any other;
/// Italian "ma" is "but", and its two clauses stay two facts.
#[tokio::test]
async fn a_sentence_with_ma_is_put_back_together_unless_it_is_italian() {
    let reply = r#"{"facts": [{"text": "Je vais voir ma sœur à Lyon"},
        {"text": "ce week-end"}, {"text": "Vivo a Roma"},
        {"text": "lavoro a Milano"}]}"#;
    let conversation = [Message::user(
        "Je vais voir ma sœur à Lyon, ce week-end. Vivo a Roma, ma lavoro a Milano.",
    )];
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        [
            "Je vais voir ma sœur à Lyon, ce week-end",
            "Vivo a Roma",
            "lavoro a Milano"
        ]
    );
}

/// Spanish and French "en" is "in": a sentence with it is put back together as any
/// other; Dutch "en" is "and", and its two clauses stay two facts.
#[tokio::test]
async fn a_sentence_with_en_is_put_back_together_unless_it_is_dutch() {
    let reply = r#"{"facts": [{"text": "Estoy de visita en Granada"},
        {"text": "en casa de mis tíos"}, {"text": "Ik woon in Gent"},
        {"text": "Ik werk in Brussel"}]}"#;
    let conversation = [Message::user(
        "Estoy de visita en Granada, en casa de mis tíos. Ik woon in Gent en ik werk in \
         Brussel.",
    )];
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        [
            "Estoy de visita en Granada, en casa de mis tíos",
            "Ik woon in Gent",
            "Ik werk in Brussel"
        ]
    );
}

#[tokio::test]
async fn a_fact_half_translated_is_kept_in_the_users_own_words() {
    // English words without a pronoun or article of English's own ("now", "at"), from a
    // user who wrote none.
    let reply = r#"{"facts": [{"text": "¡Hola! Por fin dejé el hotel"},
        {"text": "now am receptionist at a dental clinic"}]}"#;
    let conversation = [Message::user(
        "¡Hola! Por fin dejé el hotel: ahora soy recepcionista en una clínica dental.",
    )];
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        [
            "¡Hola! Por fin dejé el hotel",
            "ahora soy recepcionista en una clínica dental"
        ]
    );
}

#[tokio::test]
async fn a_fact_translated_with_an_english_verb_is_kept_in_the_users_own_words() {
    // "He" is Spanish too; "started" and "doing" are no word of the user's language.
    // It shares no word with any clause: the one clause no other fact comes from.
    let reply = r#"{"facts": [{"text": "Toco la guitarra en un grupo"},
        {"text": "He started doing rock climbing"}]}"#;
    let conversation = [Message::user(
        "Toco la guitarra en un grupo. También he empezado a hacer escalada.",
    )];
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        [
            "Toco la guitarra en un grupo",
            "También he empezado a hacer escalada"
        ]
    );
    // Both facts translated: the clause found for the first is not the second's.
    let reply = r#"{"facts": [{"text": "My girlfriend is called Rita"},
        {"text": "I work at a bank"}]}"#;
    let conversation_pt = [Message::user(
        "A minha namorada chama-se Rita. Trabalho num banco.",
    )];
    assert_eq!(
        texts(&extracted(reply, &conversation_pt, &[]).await),
        ["A minha namorada chama-se Rita", "Trabalho num banco"]
    );
    // Two clauses no other fact comes from: which one it says is not known.
    let reply = r#"{"facts": [{"text": "He started doing rock climbing"}]}"#;
    assert_eq!(
        texts(&extracted(reply, &conversation, &[]).await),
        ["He started doing rock climbing"]
    );
    // A user who may write English wrote it.
    let reply = r#"{"facts": [{"text": "Alice is 34 and she plays the ukulele"}]}"#;
    assert_eq!(
        texts(&extracted(reply, &[Message::user("About me")], &[]).await),
        ["Alice is 34 and she plays the ukulele"]
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
